import { anchorsOf, linksOf, samplesOf, slugOf } from './markdown.js';

// The docs test is only as good as these readers: each case below is one the pages use.
describe('markdown readers of the docs test', () => {
  it('make the anchors GitHub makes for our headings', () => {
    expect(slugOf('`@DistributedLock(options)`')).toBe('distributedlockoptions');
    expect(slugOf('Semaphores: `permits`')).toBe('semaphores-permits');
    expect(slugOf('Redlock (efficiency only)')).toBe('redlock-efficiency-only');
    expect(slugOf('A lock held by your transaction: `PgTransactionLock`')).toBe('a-lock-held-by-your-transaction-pgtransactionlock');
    expect(slugOf('Leader election: `campaign()`')).toBe('leader-election-campaign');
    expect(slugOf('Fencing — the token and the write')).toBe('fencing--the-token-and-the-write');
    expect(slugOf('[The board](board.md) and max_hold')).toBe('the-board-and-max_hold');
  });

  it('number a repeated heading, skip headings inside fences, and take explicit ids', () => {
    const page = ['# Options', '## Options', '```sh', '# not a heading', '```', '<a id="kept"></a>', '### Why? ###'].join('\n');
    expect([...anchorsOf(page)]).toEqual(['options', 'options-1', 'kept', 'why']);
  });

  it('find links and images outside code, with their lines', () => {
    const page = ['See [the guide](docs/guide.md#a-b) and ![shot](docs/x.png "title").', '`[not](a-link.md)` is code', '```ts', "const a = '[x](y.md)';", '```', '<a href="other.md">o</a>'].join('\n');
    expect(linksOf(page)).toEqual([
      { line: 1, target: 'docs/guide.md#a-b' },
      { line: 1, target: 'docs/x.png' },
      { line: 6, target: 'other.md' },
    ]);
  });

  it('read fenced samples with their language and opening line, indented ones unindented', () => {
    const page = ['text', '```ts', 'const a = 1;', '```', '- item', '  ```sh', '  npm test', '  ```'].join('\n');
    expect(samplesOf(page)).toEqual([
      { line: 2, lang: 'ts', code: 'const a = 1;\n' },
      { line: 6, lang: 'sh', code: 'npm test\n' },
    ]);
  });
});
