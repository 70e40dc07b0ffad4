import { errorText } from '../../common/redact.util.js';
import { InvalidLockOptionsError } from '../../errors/invalid-lock-options.error.js';
import { errnoOf, q, type MySqlPoolLike } from './mysql-client.interface.js';
import { procedureStatements, tableStatements } from './mysql.sql.js';
import { allRows, type MySqlNames } from './mysql-sql.util.js';

const WHERE = 'DistributedLockModule options';

/** Server errors that mean a setting or a grant, not an outage: bootstrap fails naming the backend. */
const CONFIGURATION_ERRORS = new Set([
  1044, // ER_DBACCESS_DENIED_ERROR
  1142, // ER_TABLEACCESS_DENIED_ERROR
  1227, // ER_SPECIFIC_ACCESS_DENIED_ERROR
  1370, // ER_PROCACCESS_DENIED_ERROR
  1286, // ER_UNKNOWN_STORAGE_ENGINE
  1290, // ER_OPTION_PREVENTS_STATEMENT (enforce_storage_engine, read_only)
  3161, // ER_DISABLED_STORAGE_ENGINE (MySQL's disabled_storage_engines)
  1665, // ER_BINLOG_STMT_MODE_AND_ROW_ENGINE…
  4050, // MariaDB: ER_… storage engine / binlog refusals
]);

/**
 * The oldest servers the backend runs on: an AUTO_INCREMENT that survives a restart (MariaDB
 * 10.2.4, MySQL 8.0; older ones rebuild it as MAX + 1: tokens could go back) and `SKIP LOCKED`
 * (MariaDB 10.6, MySQL 8.0.1), which the procedures use to tell a transaction lock's placeholder
 * from a stale one.
 */
function checkVersion(version: string, name: string): void {
  const [major, minor] = (/(\d+)\.(\d+)\.(\d+)/.exec(version) ?? []).slice(1).map(Number);
  const mariadb = /mariadb/i.test(version);
  const old = mariadb ? major < 10 || (major === 10 && minor < 6) : major < 8;
  if (old) {
    throw new InvalidLockOptionsError(
      name,
      `needs MariaDB 10.6+ or MySQL 8.0+ (an AUTO_INCREMENT that survives a restart, and SKIP LOCKED), the server is ${version}`,
      WHERE,
    );
  }
}

/**
 * At bootstrap, on one connection: the server and the pool's sessions checked (a database named,
 * autocommit on, a version whose counter persists, binary logging that takes the procedures'
 * writes), then tables and procedures created if absent, one start-up at a time (GET_LOCK).
 */
export async function createSchema(pool: MySqlPoolLike, names: MySqlNames, name: string, log: { warn(message: string): void }): Promise<void> {
  const connection = await pool.getConnection();
  try {
    const [[s]] = (await connection.query(
      q('SELECT DATABASE() AS db, @@innodb_flush_log_at_trx_commit AS flush, @@autocommit AS autocommit, VERSION() AS version, @@log_bin AS log_bin, @@binlog_format AS binlog_format'),
    )) as [Array<Record<string, unknown>>, unknown];
    if (s.db === null || s.db === undefined) throw new InvalidLockOptionsError(name, "the connection has no database: name one in the URL (mysql://user@host:3306/app) or the pool's `database`", WHERE);
    if (String(s.autocommit) !== '1') {
      throw new InvalidLockOptionsError(name, "the pool's connections start with autocommit off: the backend's single statements would never commit. Leave autocommit on (the default)", WHERE);
    }
    checkVersion(String(s.version), name);
    if (String(s.log_bin) === '1' && String(s.binlog_format).toUpperCase() === 'STATEMENT') {
      throw new InvalidLockOptionsError(name, 'binary logging in STATEMENT format refuses the procedures\' writes (they read the clock and AUTO_INCREMENT): set binlog_format to ROW or MIXED', WHERE);
    }
    if (String(s.flush) !== '1') {
      log.warn(
        `MySQL backend "${name}": innodb_flush_log_at_trx_commit is ${String(s.flush)}, not 1 — a crash of the machine may lose committed grants, ` +
          'and a token may then be issued again. Set it to 1 where correctness locks run.',
      );
    }
    await connection.query(q('SELECT GET_LOCK(CONCAT(DATABASE(), ?), 30)', [`.${names.setupLock}`]));
    try {
      for (const statement of tableStatements(names)) await connection.query(q(statement));
      const procedures = procedureStatements(names);
      const wanted = Object.keys(procedures).map((quoted) => quoted.slice(1, -1));
      const found = allRows(await connection.query(q('SELECT ROUTINE_NAME AS name FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME IN (?)', [wanted])));
      const existing = new Set(found.map((r) => String(r.name)));
      for (const [quoted, statement] of Object.entries(procedures)) {
        if (!existing.has(quoted.slice(1, -1))) await connection.query(q(statement));
      }
    } finally {
      await connection.query(q('SELECT RELEASE_LOCK(CONCAT(DATABASE(), ?))', [`.${names.setupLock}`])).catch(() => undefined);
    }
  } catch (error) {
    if (CONFIGURATION_ERRORS.has(errnoOf(error) ?? 0)) {
      throw new InvalidLockOptionsError(
        name,
        `cannot create its tables and procedures: ${errorText(error)} (it needs InnoDB and MEMORY tables, and CREATE, CREATE ROUTINE, ALTER ROUTINE, INSERT, UPDATE, DELETE, SELECT and EXECUTE on the database)`,
        WHERE,
      );
    }
    throw error;
  } finally {
    connection.release();
  }
}
