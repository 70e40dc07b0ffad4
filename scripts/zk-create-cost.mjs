// What a first holder's create costs on ZooKeeper (docs/findings/issue-34-bench.md): node scripts/zk-create-cost.mjs.
// Raw node-zookeeper-client, 16 loops over 1,000 lines: create ephemeral sequential + getChildren + remove,
// the create alone against a multi of the create and a setData of the parent (how a create learns its zxid),
// in alternating 4 s windows on one server the script starts; prints [ops/s, client CPU µs/op] per window.
import { createRequire } from 'node:module';
const require = createRequire(new URL('../package.json', import.meta.url));
const zookeeper = require('node-zookeeper-client');
const { ZooKeeperServer } = await import('../test/harness/zookeeper.mjs');
const server = await ZooKeeperServer.start();
const client = zookeeper.createClient(server.connectionString, { sessionTimeout: 10000 });
client.connect(); await new Promise((r) => client.once('connected', r));
const p = (f) => new Promise((res, rej) => f((e, ...a) => (e ? rej(e) : res(a))));
const E = zookeeper.CreateMode.EPHEMERAL_SEQUENTIAL;
await p((cb) => client.mkdirp('/raw', cb));
for (let k = 0; k < 1000; k++) await p((cb) => client.create(`/raw/k${k}`, cb)).catch(() => 0);
async function window(multi, ms) {
  let ops = 0; const end = performance.now() + ms; const cpu0 = process.cpuUsage();
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (performance.now() < end) {
      const parent = `/raw/k${Math.floor(Math.random() * 1000)}`;
      let path;
      if (multi) {
        const [results] = await p((cb) => client.transaction().create(`${parent}/o-`, undefined, undefined, E).setData(parent, Buffer.alloc(0), -1).commit(cb));
        path = results[0].path;
      } else [path] = await p((cb) => client.create(`${parent}/o-`, undefined, E, cb));
      await p((cb) => client.getChildren(parent, cb));
      await p((cb) => client.remove(path, -1, cb));
      ops++;
    }
  }));
  const c = process.cpuUsage(cpu0);
  return [Math.round(ops / ms * 1000), Math.round((c.user + c.system) / ops)];
}
await window(false, 2000); await window(true, 2000);
const out = { alone: [], multi: [] };
for (let i = 0; i < 4; i++) for (const m of i % 2 ? [true, false] : [false, true]) out[m ? 'multi' : 'alone'].push(await window(m, 4000));
console.log(JSON.stringify(out));
client.close(); await server.stop(); process.exit(0);
