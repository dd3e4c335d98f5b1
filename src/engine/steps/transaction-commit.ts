import { LeaseLostError } from '../../errors/lease-lost.error';
import type { RunCursor } from '../../interfaces/run.interface';
import type { TransactionMetadata } from '../../interfaces/transaction.interface';
import type { CheckpointWrite } from '../../store/run-state/fence';
import { rejectedByServer } from '../../store/run-state/fenced-batcher';
import { UNDEFINED_META } from '../../util/codec';
import { cursorAt } from './step-env';

/** What a durable transaction needs of its run: a step's environment and the transaction store. */
export type TransactionEnv = StepEnv & { readonly transactions?: DurableTransactionStore };
import type { DurableTransactionStore } from '../../store/transactions/transaction.store';
import type { StepEnv } from './step-env';

export const payloadOf = (meta: TransactionMetadata, index: number) => ({
  step: index,
  name: meta.name,
  kind: 'transaction',
});

/**
 * A commit: a refusal by the server (a serialization failure at COMMIT: rolled back) is an attempt's
 * failure; anything else (a lost fence, an unknown outcome) stops the run.
 */
export async function commitOrStop<T>(
  env: TransactionEnv,
  commit: () => Promise<T>,
  what: string,
): Promise<T> {
  try {
    return await commit();
  } catch (err) {
    if (err instanceof LeaseLostError || !rejectedByServer(err)) throw env.control.storeFailed(err, what);
    throw err;
  }
}

/**
 * Another database: the step's checkpoint in the module's database, after the transaction committed
 * there (or was found committed): a step write like a `@DurableStep`'s.
 */
/**
 * What the step commit of a durable transaction writes: the values pending (`records`, durable once
 * it commits), the checkpoint (its delivery `seq`; an undefined result marked), and the cursor `done`.
 */
export function commitOf(
  env: TransactionEnv,
  meta: TransactionMetadata,
  index: number,
  fingerprint: string | null,
  value: unknown,
  json: string,
): { records: CheckpointWrite[]; seq: number; writes: CheckpointWrite[]; done: RunCursor } {
  const records = env.log.takePending();
  const seq = env.log.takeSeq();
  const metaJson = value === undefined ? UNDEFINED_META : null;
  const checkpoint: CheckpointWrite = {
    index,
    name: meta.name,
    outputJson: json,
    metaJson,
    seq,
    fingerprint,
  };
  return { records, seq, writes: [...records, checkpoint], done: cursorAt(env, index, meta.name, 'done') };
}

export async function checkpointAfter(
  env: TransactionEnv,
  meta: TransactionMetadata,
  index: number,
  fingerprint: string | null,
  value: unknown,
  json: string,
): Promise<unknown> {
  const { records, seq, writes, done } = commitOf(env, meta, index, fingerprint, value, json);
  try {
    await env.fenced(
      () =>
        env.store.writeStep(env.fence, done, writes, 'run.checkpoint_saved', payloadOf(meta, index), true),
      'run.checkpoint_saved',
      records,
    );
  } catch (err) {
    env.log.abandon(seq);
    throw err;
  }
  env.control.progressed = true;
  await env.log.deliverLive(seq);
  return value;
}
