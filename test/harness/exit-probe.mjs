// "A worker process has failed to exit gracefully": jest asks a worker to end after its last file
// and force-exits it (SIGTERM) when it is still alive 500 ms later — something of some spec file
// still holds the event loop. Which one jest does not say, and it shows only now and then. Loaded
// into jest's workers by scripts/test.mjs (NODE_OPTIONS --import), this notes every timer and
// interval as it is set (its callback and delay; no stack, so it costs next to nothing), and on
// jest's SIGTERM writes what still holds the worker — ref'd timers, sockets with their ports, child
// processes — to NDL_EXIT_PROBE_DIR, which scripts/test.mjs prints after the run.
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';

const dir = process.env.NDL_EXIT_PROBE_DIR;
const isJestWorker = process.argv.some((arg) => arg.includes(`${path.sep}jest-worker${path.sep}`));

if (dir && isJestWorker) {
  const realSetTimeout = globalThis.setTimeout;
  /** Live timers: the Timeout object → what set it. Fired and cleared ones are dropped. */
  const live = new Map();
  // Timers cleared by id or by close() never come back here: drop the ended ones now and then
  // (amortised: only when the map has doubled since).
  let pruneAt = 5_000;
  const prune = () => {
    for (const timer of live.keys()) if (timer._destroyed) live.delete(timer);
    pruneAt = Math.max(5_000, live.size * 2);
  };
  const wrap = (name, repeat) => {
    const real = globalThis[name];
    const wrapped = function (callback, ms, ...args) {
      let timer;
      const run =
        typeof callback === 'function' && !repeat
          ? function (...a) {
              live.delete(timer);
              try {
                return callback.apply(this, a);
              } finally {
                // Re-armed from its own callback (refresh()): still live.
                if (!timer._destroyed && typeof timer.hasRef === 'function') live.set(timer, { kind: name, ms, callback });
              }
            }
          : callback;
      timer = real.call(this, run, ms, ...args);
      if (typeof callback === 'function' && timer && typeof timer === 'object') {
        if (live.size > pruneAt) prune();
        live.set(timer, { kind: name, ms, callback });
      }
      return timer;
    };
    Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(real)); // util.promisify.custom
    globalThis[name] = wrapped;
  };
  wrap('setTimeout', false);
  wrap('setInterval', true);
  for (const name of ['clearTimeout', 'clearInterval']) {
    const real = globalThis[name];
    const wrapped = function (timer) {
      if (timer && typeof timer === 'object') live.delete(timer);
      return real.call(this, timer);
    };
    Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(real));
    globalThis[name] = wrapped;
  }

  /** What still holds this worker: its live resources, ref'd timers (with what set them), sockets, children. */
  const snapshot = (headline) => {
    const lines = [`jest worker ${process.env.JEST_WORKER_ID ?? '?'} (pid ${process.pid}) ${headline}; still holding it: ${JSON.stringify(process.getActiveResourcesInfo())}`];
    for (const [timer, { kind, ms, callback }] of live) {
      if (timer._destroyed || (typeof timer.hasRef === 'function' && !timer.hasRef())) continue;
      const source = String(callback).replace(/\s+/g, ' ').slice(0, 240);
      lines.push(`  ${kind}(${ms} ms) ${callback.name || '(anonymous)'}: ${source}`);
    }
    for (const handle of process._getActiveHandles?.() ?? []) {
      if (typeof handle.hasRef === 'function' && !handle.hasRef()) continue;
      const name = handle?.constructor?.name ?? typeof handle;
      if (handle.remotePort !== undefined || handle.localPort !== undefined) {
        lines.push(`  ${name} ${handle.localAddress ?? ''}:${handle.localPort ?? ''} -> ${handle.remoteAddress ?? ''}:${handle.remotePort ?? ''}`);
      } else if (handle.spawnargs) {
        lines.push(`  child process ${handle.pid}: ${handle.spawnargs.join(' ').slice(0, 200)}`);
      } else if (name !== 'WriteStream' && name !== 'ReadStream' && name !== 'Pipe' && name !== 'Socket') {
        lines.push(`  ${name}`);
      }
    }
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, `worker-${process.pid}.txt`), `${lines.join('\n')}\n`);
  };

  // jest's end message (CHILD_MESSAGE_END, 2): a worker still alive 350 ms later is about to be
  // force-exited (at 500 ms). Looked at then, from inside, rather than only on jest's SIGTERM,
  // which a busy parent may send late or to a worker already gone (runs c46–c49: jest printed its
  // message every run and no SIGTERM handler ever ran). A worker that then exits on its own says
  // how long it took.
  let endAt;
  const onMessage = (message) => {
    if (!Array.isArray(message) || message[0] !== 2) return;
    process.removeListener('message', onMessage); // a 'message' listener keeps the IPC channel, and the worker, alive
    endAt = performance.now();
    realSetTimeout(() => snapshot('alive 350 ms after jest asked it to end'), 350).unref();
  };
  // Listened to only once jest's own listener is there: the IPC channel starts reading at the first
  // 'message' listener, and a message read before processChild.js has loaded (its initialize call)
  // would reach only ours — the worker then never runs a test.
  process.on('newListener', function watch(event) {
    if (event !== 'message') return;
    process.removeListener('newListener', watch);
    process.nextTick(() => process.on('message', onMessage));
  });
  process.on('exit', (code) => {
    if (endAt === undefined || performance.now() - endAt < 350) return;
    try {
      writeFileSync(path.join(dir, `worker-${process.pid}.txt`), `  … exited (code ${code}) ${Math.round(performance.now() - endAt)} ms after the end message\n`, { flag: 'a' });
    } catch {
      /* the probe must never change how the worker exits */
    }
  });

  process.on('SIGTERM', () => {
    try {
      snapshot(`force-exited (SIGTERM ${endAt === undefined ? 'before any end message' : `${Math.round(performance.now() - endAt)} ms after the end message`})`);
    } finally {
      process.exit(143);
    }
  });
}
