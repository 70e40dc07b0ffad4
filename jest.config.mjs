// Jest in ESM mode: NestJS 12 is ESM-only and jest's CommonJS loader cannot require it.
// Run through `npm test` (scripts/test.mjs), which starts the servers and sets
// NODE_OPTIONS=--experimental-vm-modules.
export default {
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleFileExtensions: ['ts', 'js', 'mjs', 'json'],
  moduleNameMapper: {
    '^nest-distributed-lock$': '<rootDir>/lib/index.ts',
    '^nest-distributed-lock/testing$': '<rootDir>/lib/testing/index.ts',
    '^nest-distributed-lock/board$': '<rootDir>/lib/board/index.ts',
    '^nest-distributed-lock/orm$': '<rootDir>/lib/orm/index.ts',
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    // Type checking runs once, up front, with tsc; here each file is only transpiled.
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testMatch: ['<rootDir>/lib/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testTimeout: 30_000,
  // A worker is replaced between spec files once its heap passes 1 GB. Without it each of the three
  // workers grew to 1-2 GB over its ~35 files (jest keeps part of every file's ESM module graph), and
  // tearing that down at the end took 437, 491 and 558 ms after jest's end message (measured in the
  // parent): past jest's 500 ms, so one was SIGTERMed and jest printed "A worker process has failed
  // to exit gracefully". With the limit the workers exited 130-228 ms after it and the run was no
  // slower (docs/findings/flakes.md, "the exit message").
  workerIdleMemoryLimit: '1GB',
};
