// A server must not outlive the test process that started it. `process.on('exit')` covers a
// normal end, but a jest killed by a signal (a developer's Ctrl-C twice, a SIGKILL, jest's force
// exit of a worker) runs neither `afterAll` nor exit handlers, and its redis-servers, etcd members,
// PostgreSQL and ZooKeeper stayed up beside the runs after it (docs/findings/flakes.md). So each
// test process that starts a server also starts one small watcher, detached, whose stdin is a pipe
// from us: the pipe reaches end-of-file only when we are gone, however we died. The watcher then
// SIGKILLs every server we told it of and did not see exit — by PID, and only if that PID is still
// the same process (its start time in /proc, read when it was registered).
import { spawn } from 'node:child_process';

const WATCH = `
const { readFileSync } = require('node:fs');
const startOf = (pid) => { try { return readFileSync('/proc/' + pid + '/stat', 'utf8').split(') ')[1].split(' ')[19]; } catch { return undefined; } };
const owned = new Map();
let rest = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const lines = (rest + chunk).split('\\n');
  rest = lines.pop();
  for (const line of lines) {
    const [op, pid, group] = line.split(' ');
    if (op === '+') owned.set(pid, { start: startOf(pid), group: group === 'group' });
    else owned.delete(pid);
  }
});
process.stdin.on('end', () => {
  for (const [pid, { start, group }] of owned) {
    if (start === undefined || startOf(pid) !== start) continue;
    try { process.kill(group ? -Number(pid) : Number(pid), 'SIGKILL'); } catch {}
  }
  process.exit(0);
});
`;

let watcher;

function watcherStdin() {
  if (!watcher) {
    watcher = spawn(process.execPath, ['-e', WATCH], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    watcher.unref();
    // The pipe must not keep this process alive: it ends with us, which is the point.
    watcher.stdin.unref?.();
    watcher.stdin.on('error', () => undefined);
  }
  return watcher.stdin;
}

/**
 * SIGKILL `child` if this process dies before it does. `group`: the child leads its own process
 * group (spawned detached), and the whole group goes.
 */
export function reapWithUs(child, { group = false } = {}) {
  if (child.pid === undefined) return;
  const pipe = watcherStdin();
  pipe.write(`+ ${child.pid}${group ? ' group' : ''}\n`);
  child.once('exit', () => {
    if (pipe.writable) pipe.write(`- ${child.pid}\n`);
  });
}
