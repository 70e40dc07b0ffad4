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
    '^(\\.{1,2}/.*)\\.js$': '$1',
  },
  transform: {
    // Type checking runs once, up front, with tsc; here each file is only transpiled.
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json' }],
  },
  testMatch: ['<rootDir>/lib/**/*.spec.ts', '<rootDir>/test/**/*.spec.ts'],
  testTimeout: 30_000,
};
