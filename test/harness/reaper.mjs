// A server must not outlive the test process that started it. `process.on('exit')` covers a
// normal end, but a jest killed by a signal (a developer's Ctrl-C twice, a SIGKILL, jest's force
// exit of a worker) runs neither `afterAll` nor exit handlers, and its redis-servers, etcd members,
// PostgreSQL and ZooKeeper stayed up beside the runs after it (docs/findings/flakes.md). So each
// test process that starts a server also starts one small watcher, detached, whose stdin is a pipe
// from us: the pipe reaches end-of-file only when we are gone, however we died. The watcher then
// SIGKILLs every server we told it of and did not see exit — by PID, and only if that PID is still
// the same process (its start time in /proc, read here right after the spawn).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';

/** The process's start time (field 22 of /proc/PID/stat; the name before it may hold anything). */
function startOf(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

const WATCH = `
const { readFileSync } = require('node:fs');
const startOf = (pid) => { try { const stat = readFileSync('/proc/' + pid + '/stat', 'utf8'); return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]; } catch { return undefined; } };
const owned = new Map();
let rest = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  const lines = (rest + chunk).split('\\n');
  rest = lines.pop();
  for (const line of lines) {
    const [op, pid, start, group] = line.split(' ');
    if (op === '+') owned.set(pid, { start, group: group === 'group' });
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
/** What the watcher was told, to tell a new one if it dies: PID → its registration line. */
const registered = new Map();

function watcherStdin() {
  if (!watcher) {
    const started = spawn(process.execPath, ['-e', WATCH], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
    started.unref();
    // The pipe must not keep this process alive: it ends with us, which is the point.
    started.stdin.unref?.();
    started.stdin.on('error', () => undefined);
    started.once('exit', () => {
      if (watcher === started) watcher = undefined;
    });
    watcher = started;
    for (const line of registered.values()) started.stdin.write(line);
  }
  return watcher.stdin;
}

/**
 * SIGKILL `child` if this process dies before it does. `group`: the child leads its own process
 * group (spawned detached), and the whole group goes.
 */
export function reapWithUs(child, { group = false } = {}) {
  const start = child.pid === undefined ? undefined : startOf(child.pid);
  if (start === undefined) return; // not started, or gone already
  const line = `+ ${child.pid} ${start}${group ? ' group' : ''}\n`;
  registered.set(child.pid, line);
  watcherStdin().write(line);
  child.once('exit', () => {
    registered.delete(child.pid);
    const pipe = watcher?.stdin;
    if (pipe?.writable) pipe.write(`- ${child.pid}\n`);
  });
}
