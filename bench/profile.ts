// `npm run bench -- --profile [--phase sequential|spread|few|hot] [--only a,b] [--rounds N] [--ops N] [--etcd] [--cpu-prof]`:
// one path alone against one server, without the other backends and peers running beside it.
// Implementations (floor, semaphore, backend, service, decorator; with --etcd: floor, service,
// decorator on a 1-member etcd) run interleaved, round by round; per implementation it prints
// wall µs and client CPU µs per acquire+release, the ratio to the floor in the same round, the
// wait p99 and, on Redis, the commands per operation by name. `--only` picks some (one alone: run
// it with --cpu-prof, which writes a V8 profile to .tmp/profiles; see docs/project/benchmarks.md).
import { Redis } from 'ioredis';
import { RedisBackend } from '../lib/backends/redis/redis.backend.js';
import { EtcdCluster, RedisServer } from '../test/harness/servers.mjs';
import { etcdFloor, ours, oursDecorator, redisFloor, type Implementation, type Unlock } from './implementations.js';
import { redisSemaphore } from './peers.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: string): string => (args.includes(`--${name}`) ? args[args.indexOf(`--${name}`) + 1] : fallback);
const phase = arg('phase', 'sequential') as 'sequential' | 'spread' | 'few' | 'hot';
const only = args.includes('--only') ? arg('only', '') : undefined;
const ROUNDS = Number(arg('rounds', only ? '1' : '8'));
const OPS = Number(arg('ops', phase === 'sequential' ? '3000' : phase === 'hot' ? '4000' : phase === 'few' ? '10000' : '20000'));
const WORKERS = 16;
const KEYS = 1_000;
const FEW_KEYS = 32;
// BENCH_TTL_MS: the leases' ttl (10 s unless set; a hot key's hand-off within the 1.5 s reservation needs no claim).
const TTL = Number(process.env.BENCH_TTL_MS ?? 10_000);

/** Our backend alone, no engine: the cost of the engine is the difference to `ours: service`. */
async function backendOnly(url: string): Promise<Implementation> {
  const client = new Redis(url);
  const backend = new RedisBackend({ client, ownsClient: true });
  let n = 0;
  return {
    name: 'ours: backend only',
    backend: 'redis',
    async lock(key): Promise<Unlock> {
      const owner = `o${n++}`;
      // Waiting as the engine does: queued, woken by the backend, asking again.
      while (!(await backend.acquire({ key, owner, ttlMs: TTL, queue: true })).acquired) await backend.waitForTurn(key, owner, 60_000);
      return async () => void (await backend.release(key, owner));
    },
    close: () => backend.close(),
  };
}

/** Redis commands run so far (scripts' own calls included), by name. */
async function commandStats(raw: Redis): Promise<Map<string, number>> {
  const stats = new Map<string, number>();
  for (const line of ((await raw.info('commandstats')) as string).split('\n')) {
    const m = /^cmdstat_(\w+):calls=(\d+)/.exec(line);
    if (m && m[1] !== 'info') stats.set(m[1], Number(m[2]));
  }
  return stats;
}

/** The Redis server's own CPU seconds so far (INFO cpu): the server shares the machine's cores with the client. */
async function serverCpu(raw: Redis): Promise<number> {
  const info = (await raw.info('cpu')) as string;
  const read = (name: string): number => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return read('used_cpu_user') + read('used_cpu_sys');
}

interface Result {
  wallUs: number;
  cpuUs: number;
  serverUs: number;
  commands: Map<string, number>;
  waitP99Ms: number;
}

async function run(impl: Implementation, tag: string, raw: Redis): Promise<Result> {
  const per = phase === 'sequential' ? OPS : OPS / WORKERS;
  const before = await commandStats(raw);
  const serverBefore = await serverCpu(raw);
  const waits: number[] = [];
  const cpu = process.cpuUsage();
  const started = performance.now();
  let seq = 0;
  await Promise.all(
    Array.from({ length: phase === 'sequential' ? 1 : WORKERS }, async () => {
      for (let i = 0; i < per; i++) {
        const key = phase === 'sequential' ? `p:${tag}:${seq++}` : phase === 'hot' ? `p:${tag}` : `p:${tag}:${Math.floor(Math.random() * (phase === 'few' ? FEW_KEYS : KEYS))}`;
        const asked = performance.now();
        const unlock = await impl.lock(key);
        waits.push(performance.now() - asked);
        if (phase === 'hot' || phase === 'few') await new Promise<void>((resolve) => setImmediate(resolve)); // a critical section that yields once
        await unlock();
      }
    }),
  );
  const wall = performance.now() - started;
  const used = process.cpuUsage(cpu);
  const serverUsed = (await serverCpu(raw)) - serverBefore;
  const after = await commandStats(raw);
  const commands = new Map([...after].map(([name, n]) => [name, (n - (before.get(name) ?? 0)) / OPS] as [string, number]).filter(([, n]) => n > 0.005));
  waits.sort((a, b) => a - b);
  // Every worker does the same number of operations here: fairness is the full bench's (a fixed time).
  return { wallUs: (wall * 1000) / OPS, cpuUs: (used.user + used.system) / OPS, serverUs: (serverUsed * 1e6) / OPS, commands, waitP99Ms: waits[Math.floor(waits.length * 0.99)] };
}

async function main(): Promise<void> {
  const server = await RedisServer.start();
  const url = `redis://127.0.0.1:${server.port}`;
  // --etcd: the etcd floor and our etcd service instead (1-member cluster; no command counts).
  const etcd = args.includes('--etcd') ? await EtcdCluster.start({ size: 1 }) : undefined;
  const makers: Record<string, () => Promise<Implementation>> = etcd ? { floor: () => etcdFloor(etcd.hosts), service: () => ours('etcd', etcd.hosts), decorator: () => oursDecorator('etcd', etcd.hosts) } : {
    floor: () => redisFloor(url),
    semaphore: async () => redisSemaphore(url),
    backend: () => backendOnly(url),
    service: () => ours('redis', url),
    decorator: () => oursDecorator('redis', url),
  };
  // --only a,b: those implementations alone (interleaved); ratios need 'floor' among them.
  const unknown = only?.split(',').filter((name) => !(name in makers));
  if (unknown?.length) throw new Error(`--only ${unknown.join(',')}: unknown here; choose from ${Object.keys(makers).join(', ')}`);
  const chosen = only ? Object.fromEntries(only.split(',').map((name) => [name, makers[name]])) : makers;
  const impls: Array<[string, Implementation]> = [];
  for (const [name, make] of Object.entries(chosen)) impls.push([name, await make()]);
  const results = new Map<string, Array<Result & { ratio?: number }>>();
  const raw = new Redis(url);
  try {
    for (const [, impl] of impls) await run(impl, `warm:${impl.name}`, raw); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      const order = impls.map((_, i) => impls[(i + round) % impls.length]);
      const byName = new Map<string, Result>();
      for (const [name, impl] of order) byName.set(name, await run(impl, `${round}:${name}`, raw));
      const floor = byName.get('floor');
      for (const [name, r] of byName) {
        results.set(name, [...(results.get(name) ?? []), { ...r, ratio: floor ? floor.wallUs / r.wallUs : undefined }]);
      }
    }
  } finally {
    for (const [, impl] of impls) await impl.close();
    raw.disconnect();
    await server.stop();
    await etcd?.stop();
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`${phase}, ${ROUNDS} rounds × ${OPS} acquire+release (medians)`);
  for (const [name, rs] of results) {
    const ratio = rs[0].ratio === undefined ? '' : `  ${median(rs.map((r) => r.ratio!)).toFixed(3)}× floor`;
    const last = rs[rs.length - 1];
    const cmds = [...last.commands].sort((a, b) => b[1] - a[1]);
    const total = cmds.reduce((n, [, c]) => n + c, 0);
    console.log(
      `${name.padEnd(10)} wall ${median(rs.map((r) => r.wallUs)).toFixed(1).padStart(6)} µs/op  cpu ${median(rs.map((r) => r.cpuUs)).toFixed(1).padStart(6)} µs/op  server ${median(rs.map((r) => r.serverUs)).toFixed(1).padStart(5)} µs/op${ratio}` +
        `  wait p99 ${median(rs.map((r) => r.waitP99Ms)).toFixed(2)} ms`,
    );
    console.log(`           ${total.toFixed(2)} Redis commands/op: ${cmds.map(([c, n]) => `${c} ${n.toFixed(2)}`).join(', ')}`);
  }
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
