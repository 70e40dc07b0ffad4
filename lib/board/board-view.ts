import type { LockPurpose } from '../interfaces/distributed-lock-options.interface.js';
import type { LockInfo } from '../interfaces/lock-info.interface.js';

/** One held key as the board's JSON gives it (`GET ${path}/api/locks`): a token is a decimal string (JSON has no bigint). */
export interface BoardLock {
  key: string;
  backend: string;
  /** The holder's purpose when it holds in this process, else the purposes its backend serves. */
  purpose: string;
  token: string | null;
  heldForMs: number | null;
  remainingMs: number;
  waiters: number;
  permits?: number;
  holders?: number;
  /** Held by this process. */
  local: boolean;
}

/** One configured backend: its locks, or why they could not be read. */
export interface BoardBackend {
  name: string;
  purposes: LockPurpose[];
  locks: BoardLock[];
  error?: string;
}

/** The whole JSON document. */
export interface BoardView {
  readOnly: boolean;
  refreshMs: number;
  at: string;
  backends: BoardBackend[];
}

export function boardLock(info: LockInfo, purposes: readonly LockPurpose[]): BoardLock {
  return {
    key: info.key,
    backend: info.backend,
    purpose: info.purpose ?? (purposes.length > 0 ? purposes.join(', ') : '—'),
    token: info.token === undefined ? null : info.token.toString(),
    heldForMs: info.heldForMs ?? null,
    remainingMs: info.remainingMs,
    waiters: info.waiters,
    ...(info.permits === undefined ? {} : { permits: info.permits, holders: info.holders }),
    local: info.local === true,
  };
}

/** Text for HTML, in an element or a quoted attribute: the five characters that could end either. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** 1234 → '1.2 s', 125000 → '2 min 5 s'. */
export function formatMs(ms: number | null): string {
  if (ms === null) return '—';
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.floor(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}
