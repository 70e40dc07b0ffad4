import type { SqlDialect } from '../common/sql-dialect.js';
import { DistributedLockError } from '../errors/distributed-lock.error.js';

/**
 * A statement cut at its placeholders: `strings[i]`, then the value `values[order[i]]`, …, then the
 * last string — the shape of a tagged template, for an ORM that only takes its own (Drizzle's
 * `sql`) or another placeholder (Knex's `?`).
 */
export interface SplitStatement {
  strings: string[];
  order: number[];
}

/**
 * Cut `text` at the placeholders its dialect's driver would bind — `$1`…`$n` (PostgreSQL, each may
 * appear several times) or `?` (MySQL, in order) — outside string literals, quoted identifiers,
 * comments and dollar-quoted bodies, which are kept as written.
 */
export function splitStatement(text: string, dialect: SqlDialect): SplitStatement {
  const strings: string[] = [];
  const order: number[] = [];
  let start = 0;
  let question = 0;
  let i = 0;
  const cut = (end: number, next: number, index: number): void => {
    strings.push(text.slice(start, end));
    order.push(index);
    start = next;
  };
  while (i < text.length) {
    const c = text[i];
    const quote = quoteEnd(text, i, dialect);
    if (quote > i) {
      i = quote;
      continue;
    }
    if (dialect === 'postgres' && c === '$') {
      const digits = /^\$(\d+)/.exec(text.slice(i, i + 12));
      if (digits && !/[\w$]/.test(text[i - 1] ?? '')) {
        cut(i, i + digits[0].length, Number(digits[1]) - 1);
        i += digits[0].length;
        continue;
      }
    }
    if (c === '?' && dialect === 'mysql') cut(i, i + 1, question++);
    i += 1;
  }
  strings.push(text.slice(start));
  return { strings, order };
}

/** Where a quoted part or a comment that starts at `i` ends (`i` itself when none starts there). */
function quoteEnd(text: string, i: number, dialect: SqlDialect): number {
  const c = text[i];
  const next = text[i + 1];
  if (c === '-' && next === '-') return lineEnd(text, i);
  if (c === '#' && dialect === 'mysql') return lineEnd(text, i);
  if (c === '/' && next === '*') {
    const end = text.indexOf('*/', i + 2);
    return end < 0 ? text.length : end + 2;
  }
  if (c === "'" || c === '"' || (c === '`' && dialect === 'mysql')) {
    // MySQL strings take backslash escapes; PostgreSQL's only in E'…' strings.
    const backslash = dialect === 'mysql' ? c !== '`' : c === "'" && /[eE]/.test(text[i - 1] ?? '') && !/\w/.test(text[i - 2] ?? '');
    return closing(text, i + 1, c, backslash);
  }
  if (c === '$' && dialect === 'postgres' && !/[\w$]/.test(text[i - 1] ?? '')) {
    const tag = /^\$([A-Za-z_][\w]*)?\$/.exec(text.slice(i));
    if (tag) {
      const end = text.indexOf(tag[0], i + tag[0].length);
      return end < 0 ? text.length : end + tag[0].length;
    }
  }
  return i;
}

/** The index after the quote that closes a part opened before `from` (a doubled quote stays inside). */
function closing(text: string, from: number, quote: string, backslash: boolean): number {
  for (let j = from; j < text.length; j += 1) {
    if (backslash && text[j] === '\\') {
      j += 1;
      continue;
    }
    if (text[j] !== quote) continue;
    if (text[j + 1] === quote) {
      j += 1;
      continue;
    }
    return j + 1;
  }
  return text.length;
}

function lineEnd(text: string, i: number): number {
  const end = text.indexOf('\n', i);
  return end < 0 ? text.length : end + 1;
}

/** The values in the order their placeholders appear (a PostgreSQL `$n` used twice gives its value twice). */
export function valuesInOrder(split: SplitStatement, values: readonly unknown[], where: string): unknown[] {
  return split.order.map((index) => {
    if (index < 0 || index >= values.length) throw new DistributedLockError(`${where}: the statement uses parameter ${index + 1}, and ${values.length} values were given`);
    return values[index];
  });
}

/**
 * Whether a statement answers with rows: a query (`SELECT`, `WITH`, `VALUES`, `SHOW`, `TABLE`) or a
 * write with `RETURNING` outside quotes — for an ORM whose raw-SQL calls split the two (Prisma's
 * `$queryRawUnsafe` returns rows and drops a write's count; `$executeRawUnsafe` the reverse).
 */
export function returnsRows(text: string, dialect: SqlDialect): boolean {
  const bare = splitStatement(text, dialect).strings.join(' ');
  const code = stripQuoted(bare, dialect);
  return /^[\s(]*(select|with|values|show|table|explain|describe|desc)\b/i.test(code) || /\breturning\b/i.test(code);
}

/** `text` with its quoted parts and comments blanked out. */
function stripQuoted(text: string, dialect: SqlDialect): string {
  let out = '';
  for (let i = 0; i < text.length; ) {
    const end = quoteEnd(text, i, dialect);
    if (end > i) {
      out += ' ';
      i = end;
    } else {
      out += text[i];
      i += 1;
    }
  }
  return out;
}
