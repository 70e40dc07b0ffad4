import { spawn } from 'node:child_process';
import net from 'node:net';
import { RedisServer, freePort, listensOn } from '../harness/servers.mjs';
import { ZooKeeperServer } from '../harness/zookeeper.mjs';
import { until } from '../harness/lock-app.js';

// The harness's own promises, which every fault spec leans on: a server it says it started is the
// one answering on its port, and a port it hands out is not handed to another test process while
// its server is down. A pingCheck once read "up" while "its" ZooKeeper was SIGSTOPped: the restart
// had "started" on a port another worker's server had taken while ours was down, our JVM had exited
// on the taken port, and the pause had stopped nothing (issue 33).

describe('test harness: ports and servers', () => {
  it('a server started on a port another server holds fails, naming the port, instead of passing for started', async () => {
    const theirs = await RedisServer.start();
    try {
      // The same port, as a restart after another process took it would see.
      const ours = new (RedisServer as unknown as new (port: number, appendonly: boolean, cluster: boolean) => RedisServer)(theirs.port, false, false);
      await expect((ours as unknown as { launch(): Promise<void> }).launch()).rejects.toThrow(new RegExp(`port ${theirs.port}`));
      expect(ours.running).toBe(false);
      expect(() => ours.pause()).toThrow(/not running/);
    } finally {
      await theirs.stop();
    }
  });

  it('a Redis Cluster node starts while another process listens on its port + 10,000 (its bus port is reserved, not assumed)', async () => {
    // Run c47-2: a cluster node of multi-key.spec exited at start. Its bus port was port + 10,000,
    // reserved by nobody, and for half the ports in the ephemeral range where client sockets live.
    let port = 0;
    const other = net.createServer();
    for (let tries = 0; tries < 50 && port === 0; tries++) {
      const candidate = await freePort();
      const bound = await new Promise<boolean>((resolve) => {
        other.once('error', () => resolve(false));
        other.listen(candidate + 10_000, '127.0.0.1', () => resolve(true));
      });
      if (bound) port = candidate;
    }
    expect(port).toBeGreaterThan(0);
    try {
      const node = await RedisServer.start({ cluster: true, port });
      try {
        expect(node.running).toBe(true);
        expect(listensOn(node.pid!, port)).not.toBe(false);
      } finally {
        await node.stop();
      }
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it('the same for ZooKeeper, whose JVM exits on a taken port only after the port has answered', async () => {
    const theirs = await ZooKeeperServer.start();
    const ours = new (ZooKeeperServer as unknown as new (port: number, options: object) => ZooKeeperServer)(theirs.port, {});
    try {
      await expect((ours as unknown as { launch(): Promise<void> }).launch()).rejects.toThrow(new RegExp(`port ${theirs.port}`));
      expect(() => ours.pause()).toThrow(/not running/);
    } finally {
      await ours.stop();
      await theirs.stop();
    }
  }, 60_000);

  it('a port handed out stays with this process while its server is down: another process never gets it', async () => {
    const server = await RedisServer.start();
    const port = server.port;
    await server.kill9();
    // Another test process asks for ports while ours is down (a jest worker beside this one).
    const script = `import { freePort } from ${JSON.stringify(new URL('../harness/servers.mjs', import.meta.url).href)};
      const ports = []; for (let i = 0; i < 400; i++) ports.push(await freePort()); console.log(JSON.stringify(ports));`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await new Promise((resolve) => child.on('exit', resolve));
    const theirs = JSON.parse(out) as number[];
    expect(theirs).toHaveLength(400);
    expect(theirs).not.toContain(port);
    // Nor does this process hand it out again, nor a port the OS gives to listen(0) or connect().
    const mine = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    expect(mine).not.toContain(port);
    const [ephemeralLow] = (await import('node:fs')).readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    for (const p of [port, ...theirs, ...mine]) expect(p).toBeLessThan(ephemeralLow);
    await server.restart();
    expect(listensOn(server.pid!, port)).toBe(true);
    await server.stop();
  }, 60_000);

  it('a server never outlives the process that started it, even one killed by SIGKILL (no afterAll, no exit handler)', async () => {
    // A test process (a jest worker, as a developer's killed run leaves it) starts a redis-server
    // and a ZooKeeper (its own process group), says their PIDs, and is killed with SIGKILL.
    const servers = JSON.stringify(new URL('../harness/servers.mjs', import.meta.url).href);
    const zookeeper = JSON.stringify(new URL('../harness/zookeeper.mjs', import.meta.url).href);
    const script = `import { RedisServer } from ${servers}; import { ZooKeeperServer } from ${zookeeper};
      const redis = await RedisServer.start(); const zk = await ZooKeeperServer.start();
      console.log(JSON.stringify([redis.pid, zk.pid])); setInterval(() => undefined, 1000);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    await until(() => out.includes(']'), 40_000, 'the child started its servers');
    const pids = JSON.parse(out) as number[];
    const alive = (pid: number): boolean => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    expect(pids.every(alive)).toBe(true);
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    try {
      await until(() => !pids.some(alive), 5_000, 'both servers gone after their starter was killed');
    } finally {
      for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
    }
  }, 60_000);

  it('listensOn tells our listener from another process’s', async () => {
    const listener = net.createServer().listen(0, '127.0.0.1');
    await new Promise((resolve) => listener.once('listening', resolve));
    const { port } = listener.address() as net.AddressInfo;
    expect(listensOn(process.pid, port)).toBe(true);
    const other = await RedisServer.start();
    try {
      expect(listensOn(process.pid, other.port)).toBe(false);
      expect(listensOn(other.pid!, other.port)).toBe(true);
    } finally {
      await other.stop();
      listener.close();
    }
  });
});
