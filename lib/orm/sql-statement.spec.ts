import { returnsRows, splitStatement, valuesInOrder } from './sql-statement.js';

describe('splitStatement: a statement cut at the placeholders its driver would bind', () => {
  it('PostgreSQL: $n in any order and repeated, casts kept, values in the order they appear', () => {
    const split = splitStatement('UPDATE "t" SET "v" = $3, "fence" = $2::bigint WHERE "id" = $1 AND (SELECT count(*) FROM "t" WHERE "id" = $1) = 1', 'postgres');
    expect(split.strings).toEqual(['UPDATE "t" SET "v" = ', ', "fence" = ', '::bigint WHERE "id" = ', ' AND (SELECT count(*) FROM "t" WHERE "id" = ', ') = 1']);
    expect(valuesInOrder(split, ['id', '7', 'v'], 'test')).toEqual(['v', '7', 'id', 'id']);
  });

  it('PostgreSQL: $n inside literals, quoted identifiers, comments and dollar quotes is text, as is $n glued to a name', () => {
    const text = `SELECT '$1', "a$1", E'\\'$1', $$ $1 $$, $tag$ $2 $tag$, x$1 -- $1\n/* $1 */, $1`;
    const split = splitStatement(text, 'postgres');
    expect(split.order).toEqual([0]);
    expect(split.strings.join('<>')).toBe(`${text.slice(0, -2)}<>`);
  });

  it('MySQL: ? in order, not inside strings (backslash escapes too), backticks or comments', () => {
    const split = splitStatement("SELECT `a?`, 'it\\'s ?', \"?\", ? # ?\n, ? -- ?\n", 'mysql');
    expect(split.order).toEqual([0, 1]);
    expect(split.strings).toEqual(["SELECT `a?`, 'it\\'s ?', \"?\", ", ' # ?\n, ', ' -- ?\n']);
  });

  it('refuses a statement that uses more parameters than given', () => {
    expect(() => valuesInOrder(splitStatement('SELECT $2', 'postgres'), ['a'], 'test')).toThrow('uses parameter 2, and 1 values were given');
  });
});

describe('returnsRows: whether a statement answers with rows', () => {
  it.each([
    ['SELECT 1', true],
    ['  with x AS (SELECT 1) SELECT * FROM x', true],
    ['UPDATE "t" SET "v" = $1 RETURNING *', true],
    ['UPDATE `t` SET `v` = ? WHERE `id` = ?', false],
    ["UPDATE t SET v = 'returning'", false],
    ['UPDATE "returning" SET v = 1', false],
  ])('%s → %s', (text, rows) => {
    expect(returnsRows(text, text.includes('`') ? 'mysql' : 'postgres')).toBe(rows);
  });
});
