import { BOARD_JS } from '../../lib/board/board-assets.js';

// Adversarial review of the board's page script: it keeps `longest` (the longest remaining time
// seen per backend+key, for the bar's length) in a Map that is only ever added to. A board tab
// left open on an application whose keys come and go (job:<id>, invoice:<id>) grows by every key
// it has ever seen — each refresh, once a second, for as long as the tab is open.

/** Just enough DOM for board.js: elements that take children, text, dataset and properties. */
class FakeElement {
  dataset: Record<string, string> = {};
  children: FakeElement[] = [];
  textContent = '';
  className = '';
  hidden = false;
  value = '';
  constructor(readonly tag: string) {}
  appendChild<T>(child: T): T {
    this.children.push(child as FakeElement);
    return child;
  }
  append(...items: unknown[]): void {
    for (const item of items) if (item instanceof FakeElement) this.children.push(item);
  }
  remove(): void {}
  addEventListener(): void {}
  querySelectorAll(): FakeElement[] {
    return [];
  }
}

type Fetch = () => Promise<{ ok: boolean; status: number; json: () => Promise<unknown> }>;

/** Runs board.js against the fake DOM; `tick()` is its refresh timer firing (it schedules the next one when done), then settling. */
function runBoard(fetch: Fetch, MapClass: unknown = Map): { status: FakeElement; updated: FakeElement; tick: () => Promise<void>; started: Promise<void> } {
  const root = new FakeElement('main');
  Object.assign(root.dataset, { api: '/locks/api/locks', readOnly: 'true', refreshMs: '1000' });
  const byId: Record<string, FakeElement> = { board: root, filter: new FakeElement('input'), status: new FakeElement('p'), updated: new FakeElement('p') };
  const document = {
    hidden: false,
    getElementById: (id: string) => byId[id],
    createElement: (tag: string) => new FakeElement(tag),
    addEventListener: () => undefined,
  };
  let timer: (() => void) | undefined;
  const settle = () => new Promise<void>((resolve) => setImmediate(resolve));
  new Function('document', 'fetch', 'setTimeout', 'clearTimeout', 'confirm', 'Map', BOARD_JS)(document, fetch, (fn: () => void) => ((timer = fn), 1), () => undefined, () => false, MapClass);
  return {
    status: byId.status,
    updated: byId.updated,
    started: settle(),
    tick: async () => {
      timer!();
      await settle();
    },
  };
}

const view = (keys: string[]) => ({
  readOnly: true,
  refreshMs: 1000,
  at: new Date().toISOString(),
  backends: [{ name: 'redis', purposes: ['efficiency'], locks: keys.map((key) => ({ key, backend: 'redis', purpose: 'efficiency', token: null, heldForMs: null, remainingMs: 10_000, waiters: 0, local: false })) }],
});

describe('board.js status line', () => {
  it('a refresh that fails once (a deploy, a 503) is not reported as failing after refreshes succeed again', async () => {
    let round = 0;
    const board = runBoard(async () => {
      round += 1;
      if (round === 2) return { ok: false, status: 503, json: async () => ({}) };
      return { ok: true, status: 200, json: async () => view(['job:1']) };
    });
    await board.started;
    await board.tick(); // 503
    expect(board.status.textContent).toBe('Could not refresh: HTTP 503');
    await board.tick(); // fine again
    await board.tick();
    expect(round).toBe(4);
    // Expected: the error goes once the page is current again. Observed: it stays, in red, forever.
    expect({ status: board.status.textContent, className: board.status.className }).toEqual({ status: '', className: '' });
  });
});

describe('board.js memory while a tab stays open', () => {
  it('remembers bar lengths only for keys it still shows, not for every key ever seen', async () => {
    const root = new FakeElement('main');
    Object.assign(root.dataset, { api: '/locks/api/locks', readOnly: 'true', refreshMs: '1000' });
    const byId: Record<string, FakeElement> = { board: root, filter: new FakeElement('input'), status: new FakeElement('p'), updated: new FakeElement('p') };
    const document = {
      hidden: false,
      getElementById: (id: string) => byId[id],
      createElement: (tag: string) => new FakeElement(tag),
      addEventListener: () => undefined,
    };
    let round = 0;
    const fetch = async () => {
      round += 1;
      // 100 keys held at any moment; each round a new set of job ids (the previous ones finished).
      const locks = Array.from({ length: 100 }, (_, i) => ({
        key: `job:${round}:${i}`,
        backend: 'redis',
        purpose: 'efficiency',
        token: null,
        heldForMs: null,
        remainingMs: 10_000,
        waiters: 0,
        local: false,
      }));
      return { ok: true, status: 200, json: async () => ({ readOnly: true, refreshMs: 1000, at: new Date().toISOString(), backends: [{ name: 'redis', purposes: ['efficiency'], locks }] }) };
    };
    let tick: (() => void) | undefined;
    const setTimeout = (fn: () => void) => ((tick = fn), 1);
    const maps: Map<unknown, unknown>[] = [];
    class SpyMap<K, V> extends Map<K, V> {
      constructor() {
        super();
        maps.push(this as Map<unknown, unknown>);
      }
    }
    const settle = () => new Promise((resolve) => setImmediate(resolve));
    new Function('document', 'fetch', 'setTimeout', 'clearTimeout', 'confirm', 'Map', BOARD_JS)(document, fetch, setTimeout, () => undefined, () => false, SpyMap);
    await settle();
    for (let i = 0; i < 60; i++) {
      tick!();
      await settle();
    }
    expect(round).toBeGreaterThanOrEqual(60);
    // One minute of refreshes: 100 keys on the page, the Map must not hold 6,000.
    const longest = maps[0];
    expect(longest.size).toBeLessThanOrEqual(100);
  });
});
