import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

/** The parts of a generated `PrismaClient` the ORM specs use. */
export interface GeneratedPrismaClient {
  $transaction<T>(work: (tx: PrismaTx) => Promise<T>, options?: { timeout?: number; maxWait?: number }): Promise<T>;
  $queryRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
  $executeRawUnsafe(query: string, ...values: unknown[]): Promise<unknown>;
  $disconnect(): Promise<void>;
}
export type PrismaTx = Omit<GeneratedPrismaClient, '$transaction' | '$disconnect'>;

const root = process.cwd();

/**
 * Generate a Prisma 7 client (the `prisma-client` generator: TypeScript, the query compiler in
 * WebAssembly, no query engine) for `provider` into .tmp/prisma/<provider>, and load its
 * `PrismaClient` class. Generated on each run, from the installed `prisma`, so it always matches
 * the installed `@prisma/client`.
 *
 * Why PRISMA_SCHEMA_ENGINE_BINARY: the CLI downloads its native schema engine (for migrations and
 * introspection) from Prisma's own host before any command, and this machine reaches only the
 * package registries. `generate` does not run that engine (it formats the schema in WebAssembly),
 * so the variable points at a stub that records any call and fails; the spec checks it was never
 * called. Nothing of the client is stubbed: the client, its query compiler and the driver adapter
 * are the real packages, against a real server.
 */
export async function generatedPrismaClient(provider: 'postgresql' | 'mysql'): Promise<new (options: { adapter: unknown }) => GeneratedPrismaClient> {
  const dir = path.join(root, '.tmp', 'prisma', provider);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const stub = path.join(dir, 'no-schema-engine.sh');
  const calls = path.join(dir, 'schema-engine-calls.log');
  writeFileSync(stub, `#!/bin/sh\necho "$@" >> '${calls}'\necho 'the schema engine is not installed here' >&2\nexit 1\n`);
  chmodSync(stub, 0o755);
  writeFileSync(
    path.join(dir, 'schema.prisma'),
    [
      'generator client {',
      '  provider = "prisma-client"',
      '  output   = "./client"',
      '}',
      `datasource db {\n  provider = "${provider}"\n}`,
      'model Account {',
      '  id      String  @id',
      '  balance BigInt',
      '  fence   BigInt  @default(0)',
      '  note    String?',
      '  @@map("orm_accounts")',
      '}',
    ].join('\n'),
  );
  const cli = spawnSync(process.execPath, [path.join(root, 'node_modules', 'prisma', 'build', 'index.js'), 'generate', '--schema', path.join(dir, 'schema.prisma')], {
    cwd: dir,
    env: { ...process.env, PRISMA_SCHEMA_ENGINE_BINARY: stub, PRISMA_HIDE_UPDATE_MESSAGE: '1', CHECKPOINT_DISABLE: '1' },
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (cli.status !== 0) throw new Error(`prisma generate (${provider}) failed: ${cli.stderr}${cli.stdout}`);
  if (existsSync(calls)) throw new Error(`prisma generate ran the schema engine stub: ${readFileSync(calls, 'utf8')}`);
  const client = (await import(pathToFileURL(path.join(dir, 'client', 'client.ts')).href)) as { PrismaClient: new (options: { adapter: unknown }) => GeneratedPrismaClient };
  return client.PrismaClient;
}
