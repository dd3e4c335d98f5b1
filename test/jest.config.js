/**
 * Unit specs live next to the code; type tests of the public API in test/types (tsc, no database); e2e
 * specs in test/e2e run against a real PostgreSQL; test/upgrade upgrades from the previous release.
 */
const ts = { '^.+\\.ts$': ['ts-jest', { tsconfig: '<rootDir>/tsconfig.json' }] };
module.exports = {
  rootDir: require('path').resolve(__dirname, '..'),
  globalSetup: '<rootDir>/test/global-setup.mjs',
  globalTeardown: '<rootDir>/test/global-teardown.mjs',
  testTimeout: 60000,
  projects: [
    {
      displayName: 'unit',
      rootDir: require('path').resolve(__dirname, '..'),
      testMatch: ['<rootDir>/src/**/*.spec.ts'],
      transform: ts,
      testEnvironment: 'node',
    },
    {
      displayName: 'types',
      rootDir: require('path').resolve(__dirname, '..'),
      testMatch: ['<rootDir>/test/types/**/*.spec.ts'],
      transform: ts,
      testEnvironment: 'node',
    },
    {
      displayName: 'e2e',
      rootDir: require('path').resolve(__dirname, '..'),
      testMatch: ['<rootDir>/test/e2e/**/*.e2e-spec.ts'],
      setupFilesAfterEnv: ['<rootDir>/test/replay-check.setup.ts'],
      transform: ts,
      testEnvironment: 'node',
    },
    {
      // Upgrading from the previous release (docs/UPGRADING.md): built from its commit in git.
      displayName: 'upgrade',
      rootDir: require('path').resolve(__dirname, '..'),
      testMatch: ['<rootDir>/test/upgrade/**/*.upgrade-spec.ts'],
      setupFilesAfterEnv: ['<rootDir>/test/replay-check.setup.ts'],
      transform: ts,
      testEnvironment: 'node',
    },
  ],
};
