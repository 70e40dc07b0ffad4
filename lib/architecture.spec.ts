import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

// The layout's rules, checked on the sources (docs/project/architecture.md explains them): imports point
// down the layers, never back up; no import cycles; no file too long to read.

const LIB = path.resolve(process.cwd(), 'lib');

/**
 * Layers, lowest first. A file may import from its own layer or a lower one. Within a layer,
 * folders do not import each other unless listed in SIDEWAYS.
 */
const LAYERS: ReadonlyArray<readonly string[]> = [
  ['errors', 'distributed-lock.constants.ts'],
  ['common'],
  ['backends'],
  ['interfaces'],
  ['engine'],
  ['options', 'fencing'],
  ['decorators', 'health', 'metrics'],
  ['distributed-lock.service.ts', 'distributed-lock.module-definition.ts'],
  ['distributed-lock.module.ts'],
  ['testing', 'board', 'orm'],
  ['index.ts'],
];
const SIDEWAYS: ReadonlyArray<readonly [string, string]> = [];
const MAX_LINES = 300;

/** `backends/redis/x.ts` → `backends`; `index.ts` → `index.ts`. */
const unitOf = (file: string): string => file.split('/')[0];
const layerOf = (file: string): number => {
  const layer = LAYERS.findIndex((units) => units.includes(unitOf(file)));
  if (layer < 0) throw new Error(`lib/${file} belongs to no layer: add its folder to LAYERS`);
  return layer;
};

function sources(dir = LIB): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return sources(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.spec.ts') ? [path.relative(LIB, full).split(path.sep).join('/')] : [];
  });
}

/** Relative imports of a lib file (value and type alike), as lib-relative .ts paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(path.join(LIB, file), 'utf8');
  const found: string[] = [];
  for (const match of text.matchAll(/(?:from|import)\s*\(?\s*'(\.{1,2}\/[^']+)'/g)) {
    found.push(path.posix.normalize(path.posix.join(path.posix.dirname(file), match[1].replace(/\.js$/, '.ts'))));
  }
  return found;
}

describe('the layout (docs/project/architecture.md)', () => {
  const files = sources();
  const graph = new Map(files.map((file) => [file, importsOf(file)]));

  it('imports point down the layers: a backend never imports the engine, the engine never the options or the decorators', () => {
    const upward: string[] = [];
    for (const [file, imports] of graph) {
      for (const target of imports) {
        const from = layerOf(file);
        const to = layerOf(target);
        const sameUnit = unitOf(file) === unitOf(target);
        const sideways = SIDEWAYS.some(([a, b]) => a === unitOf(file) && b === unitOf(target));
        if (to > from || (to === from && !sameUnit && !sideways)) upward.push(`lib/${file} → lib/${target}`);
      }
    }
    expect(upward).toEqual([]);
  });

  it('no import cycle', () => {
    const cycles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const stack: string[] = [];
    const visit = (file: string): void => {
      state.set(file, 'open');
      stack.push(file);
      for (const target of graph.get(file) ?? []) {
        if (state.get(target) === 'open') cycles.push([...stack.slice(stack.indexOf(target)), target].join(' → '));
        else if (!state.has(target)) visit(target);
      }
      stack.pop();
      state.set(file, 'done');
    };
    for (const file of files) if (!state.has(file)) visit(file);
    expect(cycles).toEqual([]);
  });

  it(`no file over ${MAX_LINES} lines (Lua and SQL text files aside: *.scripts.ts, *.sql.ts)`, () => {
    const long = files.filter((file) => !/\.(scripts|sql)\.ts$/.test(file) && readFileSync(path.join(LIB, file), 'utf8').split('\n').length > MAX_LINES);
    expect(long).toEqual([]);
  });
});
