// ZooKeeper through DistributedLockService, 16 workers x 1,000 keys, two or more checkouts side by side in
// alternating windows on one server; counts the client's requests per critical section (docs/findings/issue-34-bench.md).
// Each checkout needs `npm ci && npm run build`. Usage: node scripts/zk-service-ab.mjs <checkout> <checkout> (ROUNDS, WINDOW ms in the env).
import { createRequire } from 'node:module';
const dirs = process.argv.slice(2);
const require0 = createRequire(new URL('../package.json', import.meta.url));
const zookeeper = require0('node-zookeeper-client');
const { ZooKeeperServer } = await import('../test/harness/zookeeper.mjs');
const server = await ZooKeeperServer.start();
const WINDOW = Number(process.env.WINDOW ?? 5000);
async function make(dir, i) {
  const req = createRequire(`${dir}/package.json`);
  const common = req('@nestjs/common');
  const core = req('@nestjs/core');
  const lib = await import(`${dir}/dist/lib/index.js`);
  const client = zookeeper.createClient(server.connectionString, { sessionTimeout: 10000 });
  client.connect(); await new Promise((r) => client.once('connected', r));
  const counts = {};
  for (const m of ['create', 'getChildren', 'getData', 'exists', 'setData', 'remove']) {
    const real = client[m].bind(client);
    client[m] = (...a) => { counts[m] = (counts[m] ?? 0) + 1; return real(...a); };
  }
  const realTx = client.transaction.bind(client);
  client.transaction = () => { counts.multi = (counts.multi ?? 0) + 1; return realTx(); };
  class M {}
  common.Module({ imports: [lib.DistributedLockModule.forRoot({ zookeeper: { client, prefix: `/ab${i}` }, metrics: false })] })(M);
  const app = await core.NestFactory.createApplicationContext(M, { logger: false });
  await app.init();
  const svc = app.get(lib.DistributedLockService);
  return { dir, svc, counts, app, client };
}
const impls = [];
for (const [i, d] of dirs.entries()) impls.push(await make(d, i));
async function window(impl, ms) {
  for (const k of Object.keys(impl.counts)) impl.counts[k] = 0;
  let ops = 0; const end = performance.now() + ms; const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (performance.now() < end) {
      const lease = await impl.svc.acquire(`k${Math.floor(Math.random() * 1000)}`, { purpose: 'correctness', ttl: 10000, wait: 10000 });
      await null;
      await lease.release();
      ops++;
    }
  }));
  const c = process.cpuUsage(cpu0);
  const per = Object.fromEntries(Object.entries(impl.counts).map(([k, v]) => [k, +(v / ops).toFixed(3)]));
  return { ops: Math.round(ops / ms * 1000), cpu: Math.round((c.user + c.system) / ops), per };
}
for (const impl of impls) await window(impl, 2000);
for (let r = 0; r < Number(process.env.ROUNDS ?? 3); r++) {
  const order = r % 2 ? [...impls].reverse() : impls;
  for (const impl of order) console.log(impl.dir, JSON.stringify(await window(impl, WINDOW)));
}
for (const impl of impls) { await impl.app.close(); impl.client.close(); }
await server.stop(); process.exit(0);
