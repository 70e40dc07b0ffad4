import { randomBytes } from 'node:crypto';
import { InvalidLockOptionsError } from '../errors/invalid-lock-options.error.js';
import { StaleFencingTokenError } from '../errors/stale-fencing-token.error.js';
import type { EtcdClientLike } from '../backends/etcd/etcd-client.interface.js';
import { checkResourceKey, fenceToken, type LeaseSource } from './fence-token.util.js';

export interface EtcdFenceOptions {
  /** Prefix of the resource keys. @default 'fence/' */
  prefix?: string;
  /** Supplies the token when a call passes none: the service (`leases: locks`). */
  leases?: LeaseSource;
  /**
   * The lock key that protects a resource key, for implicit tokens: the token is taken only from
   * the lease on that key. @default the resource key itself
   */
  lockKey?: (key: string) => string;
  /**
   * gRPC deadline of every call, ms: a call into a partition fails (outcome unknown for a write)
   * instead of staying pending — and keeping the process alive — for good. @default 10000
   */
  timeoutMs?: number;
}

/**
 * A write leaves a marker `<key>/w/<write id>` on a lease this long: a copy of the write resent
 * after its answer was lost (etcd3 retries on another member when one dies) finds it, and knows
 * its first copy was applied. A new lease is taken when the current one has less than half left.
 */
const MARKER_LEASE_SECONDS = 60;

/** Tokens are stored zero-padded to 20 digits, so etcd's byte order is numeric order below 10^20. */
const MAX_TOKEN = 10n ** 20n - 1n;
const pad = (token: bigint): Buffer => Buffer.from(token.toString().padStart(20, '0'));

/**
 * A fenced store in etcd: each resource key has a companion `<key>/fence` holding the highest
 * token seen. Every operation is one txn whose compare refuses a token below the fence, so the
 * check and the write are atomic on the cluster. Same rule as `RedisFence`: lower refused, equal
 * accepted, a fenced read raises the fence.
 */
export class EtcdFence {
  private readonly prefix: string;
  private readonly timeoutMs: number;
  private markerLease?: { id: Promise<string>; takenAt: number };

  constructor(
    private readonly client: EtcdClientLike,
    private readonly options: EtcdFenceOptions = {},
  ) {
    this.prefix = options.prefix ?? 'fence/';
    const timeoutMs = options.timeoutMs ?? 10_000;
    if (typeof timeoutMs !== 'number' || !Number.isInteger(timeoutMs) || timeoutMs < 1 || timeoutMs > 2_147_483_647) {
      throw new InvalidLockOptionsError('timeoutMs', `must be a whole number of ms between 1 and 2147483647, got ${String(timeoutMs)}`, 'EtcdFence');
    }
    this.timeoutMs = timeoutMs;
  }

  async write(key: string, value: string, token?: bigint | number): Promise<void> {
    const where = `EtcdFence.write(${JSON.stringify(key)})`;
    checkResourceKey(key, where);
    if (typeof value !== 'string') throw new InvalidLockOptionsError('value', 'must be a string (serialize it first)', where);
    const fenced = this.tokenFor(token, where, key);
    const marker = Buffer.from(`${this.prefix}${encodeURIComponent(key)}/w/${randomBytes(12).toString('base64url')}`);
    const lease = await this.leaseForMarkers();
    // Stale: the fence, and this write's marker — there if an earlier copy of this very request was
    // applied (the client resent it after the answer was lost, and the fence rose in between).
    const response = await this.client.kv.txn({
      compare: [{ key: this.fenceKey(key), target: 'Value', result: 'Greater', value: pad(fenced) }],
      success: [{ request_range: { key: this.fenceKey(key) } }, { request_range: { key: marker, keys_only: true } }],
      failure: [
        { request_put: { key: this.dataKey(key), value: Buffer.from(value) } },
        { request_put: { key: this.fenceKey(key), value: pad(fenced) } },
        { request_put: { key: marker, value: Buffer.alloc(0), lease } },
      ],
    }, this.deadline());
    if (response.succeeded && response.responses[1].response_range.kvs.length === 0) throw this.stale(key, fenced, response);
  }

  /** The lease the write markers live on (taken again when half of it has passed). */
  private async leaseForMarkers(): Promise<string> {
    const now = Date.now();
    if (!this.markerLease || now - this.markerLease.takenAt > (MARKER_LEASE_SECONDS * 1_000) / 2) {
      const lease = this.client.lease(MARKER_LEASE_SECONDS, { autoKeepAlive: false, deadline: this.deadline().deadline });
      const id = lease.grant().finally(() => lease.release());
      this.markerLease = { id, takenAt: now };
      // A failed grant is not kept: the next write asks again.
      id.catch(() => {
        if (this.markerLease?.id === id) this.markerLease = undefined;
      });
    }
    return this.markerLease.id;
  }

  /** Read through the fence: raises it to the token; a stale token throws. */
  async read(key: string, token?: bigint | number): Promise<string | null> {
    const where = `EtcdFence.read(${JSON.stringify(key)})`;
    checkResourceKey(key, where);
    const fenced = this.tokenFor(token, where, key);
    const response = await this.client.kv.txn({
      compare: [{ key: this.fenceKey(key), target: 'Value', result: 'Greater', value: pad(fenced) }],
      success: [{ request_range: { key: this.fenceKey(key) } }],
      failure: [{ request_put: { key: this.fenceKey(key), value: pad(fenced) } }, { request_range: { key: this.dataKey(key) } }],
    }, this.deadline());
    if (response.succeeded) throw this.stale(key, fenced, response);
    const kv = response.responses[1].response_range.kvs[0];
    return kv ? kv.value.toString() : null;
  }

  /** The key's fence (highest token seen), or undefined. */
  async fence(key: string): Promise<bigint | undefined> {
    checkResourceKey(key, `EtcdFence.fence(${JSON.stringify(key)})`);
    const response = await this.client.kv.range({ key: this.fenceKey(key) }, this.deadline());
    return response.kvs[0] ? BigInt(response.kvs[0].value.toString()) : undefined;
  }

  private stale(key: string, token: bigint, response: { responses: Array<{ response_range: { kvs: Array<{ value: Buffer }> } }> }): StaleFencingTokenError {
    return new StaleFencingTokenError(key, token, BigInt(response.responses[0].response_range.kvs[0].value.toString()));
  }

  private tokenFor(token: bigint | number | undefined, where: string, key: string): bigint {
    const fenced = fenceToken(token, this.options.leases, where, this.options.lockKey ? this.options.lockKey(key) : key);
    if (fenced > MAX_TOKEN) {
      // etcd revisions (int64) never get here; an explicit token this large would compare wrongly.
      throw new InvalidLockOptionsError('token', `must be below 10^20 (EtcdFence compares 20-digit values), got ${fenced}`, where);
    }
    return fenced;
  }

  private deadline(): { deadline: Date } {
    return { deadline: new Date(Date.now() + this.timeoutMs) };
  }

  private dataKey(key: string): Buffer {
    return Buffer.from(`${this.prefix}${encodeURIComponent(key)}`);
  }

  private fenceKey(key: string): Buffer {
    return Buffer.from(`${this.prefix}${encodeURIComponent(key)}/fence`);
  }
}
