import { nextTurn, type LineOperations, type LinePlace } from './ordered-queue.js';

// The ordered-queue recipe's decisions, on a scripted line (the etcd and ZooKeeper backends run it
// against their servers: test/integration/release-to-next-waiter.spec.ts and the conformance suite).
describe('nextTurn (the ordered-queue recipe)', () => {
  interface Entry {
    id: string;
    lost: boolean;
  }

  /** A line whose look answers `place` (and whose record answers `recorded`; null: the entry is gone), logging every call. */
  function scripted(place: LinePlace<string>, recorded: bigint | null = 7n) {
    const log: string[] = [];
    const queued = new Map<string, Entry>();
    const line: LineOperations<Entry, string> & { onLook?: () => void; onRecord?: () => void } = {
      look: async (owner) => {
        log.push(`look ${owner}`);
        line.onLook?.();
        return place;
      },
      current: (owner, entry) => queued.get(owner) === entry,
      lost: (entry) => entry.lost,
      watchAhead: (owner, _entry, predecessor) => void log.push(`watch ${owner} behind ${predecessor}`),
      record: async (owner) => {
        log.push(`record ${owner}`);
        line.onRecord?.();
        return recorded ?? undefined;
      },
      grant: (owner, _entry, token, grant) => {
        log.push(`grant ${owner} ${token} ${grant}`);
        queued.delete(owner);
        return { acquired: true, token };
      },
      drop: (owner) => {
        log.push(`drop ${owner}`);
        queued.delete(owner);
      },
    };
    const entry: Entry = { id: 'e', lost: false };
    queued.set('a', entry);
    return { line, log, queued, entry };
  }

  it('holds with the hand-over write as its token, and writes nothing of its own', async () => {
    const { line, log, entry } = scripted({ kind: 'handed', token: 42n, grant: 'next=b' });
    await expect(nextTurn(line, 'a', entry)).resolves.toEqual({ acquired: true, token: 42n });
    expect(log).toEqual(['look a', 'grant a 42 next=b']);
  });

  it('first in line: holds once one write has recorded the grant, with its revision as the token', async () => {
    const { line, log, entry } = scripted({ kind: 'first', grant: 'next=none' }, 9n);
    await expect(nextTurn(line, 'a', entry)).resolves.toEqual({ acquired: true, token: 9n });
    expect(log).toEqual(['look a', 'record a', 'grant a 9 next=none']);
  });

  it('behind somebody: watches that one and answers "not yet"', async () => {
    const { line, log, entry, queued } = scripted({ kind: 'ahead', predecessor: 'p' });
    await expect(nextTurn(line, 'a', entry)).resolves.toEqual({ acquired: false });
    expect(log).toEqual(['look a', 'watch a behind p']);
    expect(queued.get('a')).toBe(entry);
  });

  it('its entry gone: dropped, and undefined (start over)', async () => {
    const { line, log, entry, queued } = scripted({ kind: 'gone' });
    await expect(nextTurn(line, 'a', entry)).resolves.toBeUndefined();
    expect(log).toEqual(['look a', 'drop a']);
    expect(queued.has('a')).toBe(false);
  });

  it('its session lost while the look was out: nothing granted, the entry dropped, whatever the look said', async () => {
    const { line, log, entry } = scripted({ kind: 'handed', token: 42n, grant: 'x' });
    line.onLook = () => void (entry.lost = true);
    await expect(nextTurn(line, 'a', entry)).resolves.toBeUndefined();
    expect(log).toEqual(['look a', 'drop a']);
  });

  it('released while the look was out (its entry deleted by that release): grants nothing and touches nothing', async () => {
    const { line, log, entry, queued } = scripted({ kind: 'first', grant: 'x' });
    line.onLook = () => void queued.delete('a');
    await expect(nextTurn(line, 'a', entry)).resolves.toBeUndefined();
    expect(log).toEqual(['look a']);
  });

  it('a record that finds the entry gone (or its session lost meanwhile) grants nothing and drops the entry', async () => {
    const gone = scripted({ kind: 'first', grant: 'x' }, null);
    await expect(nextTurn(gone.line, 'a', gone.entry)).resolves.toBeUndefined();
    expect(gone.log).toEqual(['look a', 'record a', 'drop a']);

    const lost = scripted({ kind: 'first', grant: 'x' }, 9n);
    lost.line.onRecord = () => void (lost.entry.lost = true);
    await expect(nextTurn(lost.line, 'a', lost.entry)).resolves.toBeUndefined();
    expect(lost.log).toEqual(['look a', 'record a', 'drop a']);
  });

  it('released while the record was out, with the record refused: no drop of what the release already took', async () => {
    const { line, log, entry, queued } = scripted({ kind: 'first', grant: 'x' }, null);
    line.onRecord = () => void queued.delete('a');
    await expect(nextTurn(line, 'a', entry)).resolves.toBeUndefined();
    expect(log).toEqual(['look a', 'record a']);
  });

  it('released while the record was out, the record written first: grants nothing (the release deleted what it wrote)', async () => {
    const { line, log, entry, queued } = scripted({ kind: 'first', grant: 'x' }, 9n);
    line.onRecord = () => void queued.delete('a');
    await expect(nextTurn(line, 'a', entry)).resolves.toBeUndefined();
    expect(log).toEqual(['look a', 'record a']);
  });
});
