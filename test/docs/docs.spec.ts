import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';
import { anchorsOf, linksOf, pagesOf, samplesOf } from './markdown.js';

const run = promisify(execFile);
const root = process.cwd();

/** The pages a user reads: the README, the changelog and everything under docs/. */
const pages = pagesOf(root, (dir) => readdirSync(dir), (path) => statSync(path).isDirectory());
const text = new Map(pages.map((page) => [page, readFileSync(join(root, page), 'utf8')]));

describe('the docs', () => {
  it('are the README, the changelog and the pages under docs/ (each read below)', () => {
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'CHANGELOG.md']));
    expect(pages.filter((p) => p.startsWith('docs/')).length).toBeGreaterThanOrEqual(20);
  });

  it('hold samples in TypeScript (compiled below), shell or SQL only, or plain text', () => {
    const odd: string[] = [];
    for (const page of pages) for (const s of samplesOf(text.get(page)!)) if (!['ts', 'sh', 'sql', 'text', 'json'].includes(s.lang)) odd.push(`${page}:${s.line}: ${s.lang || '(none)'}`);
    expect(odd).toEqual([]);
  });

  it('link only to files and anchors that exist', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const link of linksOf(text.get(page)!)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link.target)) continue; // https:, mailto: — not ours to check
        const [file, anchor] = link.target.split('#', 2) as [string, string | undefined];
        const target = file === '' ? join(root, page) : resolve(root, dirname(page), decodeURIComponent(file));
        const where = `${page}:${link.line}: (${link.target})`;
        if (!target.startsWith(root + '/') || !existsSync(target)) {
          broken.push(`${where} — no such file`);
          continue;
        }
        if (anchor === undefined) continue;
        const name = relative(root, target);
        if (!name.endsWith('.md')) broken.push(`${where} — an anchor into a file that is not markdown`);
        else if (!anchorsOf(text.get(name) ?? readFileSync(target, 'utf8')).has(anchor)) broken.push(`${where} — no heading makes #${anchor}`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('keep the README short and every page within ~400 lines (findings are records, not pages)', () => {
    const long = pages
      .filter((p) => !p.startsWith('docs/findings/') && p !== 'CHANGELOG.md')
      .map((p) => [p, text.get(p)!.split('\n').length] as const)
      .filter(([p, n]) => n > (p === 'README.md' ? 350 : 420));
    expect(long).toEqual([]);
  });

  it('every ```ts sample compiles against the package as users import it', async () => {
    const dir = join(root, '.tmp/docs-samples');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const origin = new Map<string, string>();
    let n = 0;
    for (const page of pages) {
      for (const sample of samplesOf(text.get(page)!).filter((s) => s.lang === 'ts')) {
        const file = `sample-${String(++n).padStart(3, '0')}.ts`;
        origin.set(file, `${page} sample at line ${sample.line}`);
        // A relative import names a file beside the page (a sample in docs/samples): resolved from the page.
        const code = sample.code.replace(/(from\s+')(\.\.?\/[^']+)'/g, (_m, from: string, path: string) => `${from}${relative(dir, resolve(root, dirname(page), path))}'`);
        // Each sample is a module of its own, so names never clash between samples.
        writeFileSync(join(dir, file), /^\s*(import|export)\s/m.test(code) ? code : `${code}\nexport {};\n`);
      }
    }
    expect(n).toBeGreaterThanOrEqual(30); // 31 when written: fewer means the reader lost some
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ extends: '../../tsconfig.json', compilerOptions: { noEmit: true, rootDir: '../..' }, include: ['*.ts'], exclude: [] }));
    const result = await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { cwd: root, timeout: 150_000 }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    // Point each diagnostic at the page and line its sample starts on.
    expect(result.replace(/sample-\d+\.ts/g, (file) => origin.get(file) ?? file)).toBe('');
  }, 180_000);
});
