import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = process.cwd();

interface Sample {
  line: number;
  lang: string;
  code: string;
}

/** Every fenced block of the README, with its language and the line it starts on (indented ones too). */
function samples(markdown: string): Sample[] {
  const found: Sample[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```(\w*)\s*$/.exec(lines[i]);
    if (!open) continue;
    const indent = open[1].length;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j])) body.push(lines[j++].slice(indent));
    found.push({ line: i + 1, lang: open[2], code: body.join('\n') + '\n' });
    i = j;
  }
  return found;
}

describe('README code samples', () => {
  const all = samples(readFileSync(join(root, 'README.md'), 'utf8'));
  const ts = all.filter((s) => s.lang === 'ts');

  it('are all TypeScript (compiled below), shell or SQL — no untested language', () => {
    expect(all.filter((s) => !['ts', 'sh', 'sql'].includes(s.lang)).map((s) => `line ${s.line}: ${s.lang || '(none)'}`)).toEqual([]);
    expect(ts.length).toBeGreaterThanOrEqual(13);
  });

  it('every ```ts sample compiles against the package as users import it', async () => {
    const dir = join(root, '.tmp/readme-samples');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const fileOf = new Map<string, number>();
    ts.forEach((sample, i) => {
      const file = `sample-${String(i + 1).padStart(2, '0')}-line-${sample.line}.ts`;
      fileOf.set(file, sample.line);
      // Each sample is a module of its own, so names never clash between samples.
      writeFileSync(join(dir, file), /^\s*(import|export)\s/m.test(sample.code) ? sample.code : `${sample.code}\nexport {};\n`);
    });
    writeFileSync(
      join(dir, 'tsconfig.json'),
      JSON.stringify({
        extends: '../../tsconfig.json',
        compilerOptions: { noEmit: true, rootDir: '../..' },
        include: ['*.ts'],
        exclude: [],
      }),
    );
    const result = await run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', dir], { cwd: root, timeout: 120_000 }).then(
      () => '',
      (error: { stdout?: string }) => error.stdout ?? String(error),
    );
    // Point each diagnostic at the README line its sample starts on.
    const explained = result.replace(/sample-\d+-line-(\d+)\.ts/g, (_m, line: string) => `README.md sample at line ${line}`);
    expect(explained).toBe('');
  }, 150_000);
});
