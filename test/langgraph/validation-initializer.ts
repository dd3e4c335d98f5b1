/**
 * The `CheckpointerTestInitializer` of `@langchain/langgraph-checkpoint-validation` for
 * `DurablePostgresSaver`, on the migrated database named by LANGGRAPH_VALIDATION_DB_URL. Every
 * `createCheckpointer` starts from empty tables: the suite's `list` cases count every checkpoint stored.
 */
import { Pool } from 'pg';
import { DurablePostgresSaver } from '../../src/langgraph';

let pool: Pool | undefined;

function db(): Pool {
  const url = process.env.LANGGRAPH_VALIDATION_DB_URL;
  if (!url) throw new Error('LANGGRAPH_VALIDATION_DB_URL is not set');
  // An idle connection the server ends is dropped by the pool (a listener keeps it from failing the test).
  pool ??= new Pool({ connectionString: url, max: 4 }).on('error', (err) =>
    console.warn(`idle connection ended: ${err.message}`),
  );
  return pool;
}

export default {
  checkpointerName: 'nestjs-durable-execution DurablePostgresSaver',
  async afterAll(): Promise<void> {
    await pool?.end();
    pool = undefined;
  },
  async createCheckpointer(): Promise<DurablePostgresSaver> {
    await db().query(
      'truncate langgraph_checkpoints, langgraph_blobs, langgraph_writes, langgraph_journal, langgraph_threads',
    );
    return new DurablePostgresSaver({ db: db() });
  },
};
