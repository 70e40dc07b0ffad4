import { createServer, connect, type Server, type Socket } from 'node:net';
import { once } from 'node:events';
import { AnswerDeadlines } from './answer-deadlines.js';
import { withTimeout } from './backend-call.util.js';

// A deadline that comes due while the event loop is blocked must not time out an answer that is
// already waiting in a socket: the loop runs its timers before it reads its sockets. Pure logic on
// a loopback socket pair of this process (the "server" writes its answer before the block).

function blockFor(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy
  }
}

describe('a deadline due during an event-loop stall lets an answer already received settle first', () => {
  let server: Server;
  let near: Socket;
  let far: Socket;

  beforeEach(async () => {
    server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection');
    near = connect((server.address() as { port: number }).port, '127.0.0.1');
    await once(near, 'connect');
    [far] = (await accepted) as [Socket];
  });
  afterEach(async () => {
    near.destroy();
    far.destroy();
    server.close();
    await once(server, 'close');
  });

  /** The answer: the next data on `near`. */
  const answer = (): Promise<string> => once(near, 'data').then(([chunk]) => String(chunk));

  it('AnswerDeadlines: answered before the stall ends → resolves; a call with no answer still times out', async () => {
    const deadlines = new AnswerDeadlines(50);
    const answered = deadlines.bound(answer(), () => new Error('timed out'), (e) => e);
    const unanswered = deadlines.bound(new Promise<string>(() => undefined), () => new Error('timed out'), (e) => e);
    far.write('OK');
    blockFor(200);
    await expect(answered).resolves.toBe('OK');
    await expect(unanswered).rejects.toThrow('timed out');
  });

  it('withTimeout: the same', async () => {
    const answered = withTimeout(answer(), 50, () => new Error('timed out'));
    const unanswered = withTimeout(new Promise<string>(() => undefined), 50, () => new Error('timed out'));
    far.write('OK');
    blockFor(200);
    await expect(answered).resolves.toBe('OK');
    await expect(unanswered).rejects.toThrow('timed out');
  });

  it('an answer that comes after the deadline (no stall) still loses to it', async () => {
    const deadlines = new AnswerDeadlines(50);
    const late = deadlines.bound(answer(), () => new Error('timed out'), (e) => e);
    const lateToo = withTimeout(answer(), 50, () => new Error('timed out'));
    setTimeout(() => far.write('late'), 150);
    await expect(late).rejects.toThrow('timed out');
    await expect(lateToo).rejects.toThrow('timed out');
    await once(near, 'data');
  });
});
