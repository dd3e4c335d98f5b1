// The vitest configuration of the LangGraph checkpointer validation suite (run by
// test/e2e/langgraph-checkpoint-validation.e2e-spec.ts, not by jest).
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/langgraph/*.vitest.mts'],
    globals: true,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    fileParallelism: false,
  },
});
