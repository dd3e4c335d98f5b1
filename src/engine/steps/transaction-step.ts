import { performance } from 'node:perf_hooks';
import { LeaseLostError } from '../../errors/lease-lost.error';
import { StepTimeoutError } from '../../errors/step-timeout.error';
import type { TransactionMetadata } from '../../interfaces/transaction.interface';
import type { DurableTransactionStore, TransactionTarget } from '../../store/transactions/transaction.store';
import { transactionStorage } from '../../store/transactions/transaction-session';
import { completeOther, fenceOther } from '../../store/transactions/other-database';
import { decodeStored, encodeOutput } from '../../util/codec';
import { argsJson, callFingerprint } from '../call-fingerprint';
import { crashPoint } from '../crash-points';
import { flushBeforeCall } from '../held-commit';
import type { TrackedBody } from '../live-calls';
import { attemptTimeout, settleOrAbandon, withRetry, withTimeout } from '../retry';
import { errorFromStored } from '../stored-error';
import { gated, type WireGate } from '../wire/wire-gate';
import { failed } from './compute-step';
import { checkpointAfter, commitOf, commitOrStop, payloadOf, TransactionEnv } from './transaction-commit';
import { goLive } from './step-env';
import { countFailure, recordedFailures, spentAttempts } from './step-attempts';

export type { TransactionEnv };

/**
 * One `@DurableTransaction` call inside a run: the recorded result on replay (in its delivery order),
 * else the body run in one PostgreSQL transaction whose last statement is the step's fenced commit.
 */
export async function executeTransaction(
  env: TransactionEnv,
  meta: TransactionMetadata,
  call: () => unknown,
  args: unknown[] = [],
): Promise<unknown> {
  const index = env.log.allocIndex();
  const parking = env.control.checkNewCall();
  if (parking) await parking;
  const fingerprint = callFingerprint(meta.name, argsJson(args));
  const rec = env.log.recordedAt(index, meta.name, fingerprint);
  if (rec) {
    await env.log.replayed(index);
    if (rec.failed) throw errorFromStored(rec.output);
    return rec.output;
  }
  const live = goLive(env, index, meta.name);
  if (live) await live;
  const run = () => runTransaction(env, meta, index, call, fingerprint);
  const running = env.observers
    ? env.observers.step(env.stepInfo(index, meta.name, 'transaction'), run)
    : run();
  return env.control.track(running.catch((err) => failed(env, meta, index, fingerprint, err)));
}

/** The attempts of a transaction not yet recorded, under its retry policy (counted across claims). */
async function runTransaction(
  env: TransactionEnv,
  meta: TransactionMetadata,
  index: number,
  call: () => unknown,
  fingerprint: string | null,
): Promise<unknown> {
  const held = flushBeforeCall(env);
  if (held) await held;
  const store = env.transactions;
  if (!store) throw new Error(`@DurableTransaction ${meta.declaredAt}: no transaction store in this run`);
  const policy = { ...env.options.defaultRetry, ...meta.retry };
  const prior = recordedFailures(env, index, meta.name);
  let failures = prior?.count ?? 0;
  if (prior && failures >= policy.maxAttempts) throw spentAttempts(prior);
  const target = await store.target(meta.dataSource);
  let tries = 0;
  let previous: TrackedBody<unknown> | null = null;
  const attempt = async () => {
    // A body abandoned at its deadline may still run: the next attempt starts once it has settled, or
    // after a grace (its transaction is rolled back already).
    if (previous) await settleOrAbandon(previous);
    const paused = env.pause('before-call', `transaction:${meta.name}`);
    if (paused) await paused;
    const renewing = env.lease.ensure(`transaction ${meta.name}`);
    if (renewing) await renewing;
    const body = { promise: null as TrackedBody<unknown> | null };
    try {
      return await attemptOnce(env, store, target, meta, index, call, fingerprint, ++tries, body);
    } catch (err) {
      failures = await countFailure(env, meta.name, index, err, failures); // durable before a retry
      throw err;
    } finally {
      previous = body.promise;
    }
  };
  return withRetry(policy, env.control.signal, attempt, failures + 1);
}

/**
 * One attempt: BEGIN, the body inside the transaction (its gate and frame), then the commit: on the
 * module's database the step's fenced write is the transaction's last statement; on another database
 * the run's fence there is raised first and a completion row is its last statement, and the checkpoint
 * follows the COMMIT (a crash in between is read back from the completion row). Whatever fails before
 * the COMMIT rolls everything back; a commit whose outcome is unknown (the connection lost while it was
 * under way) stops the run, so the next claim reads what committed instead of running the body again.
 */
async function attemptOnce(
  env: TransactionEnv,
  store: DurableTransactionStore,
  target: TransactionTarget,
  meta: TransactionMetadata,
  index: number,
  call: () => unknown,
  fingerprint: string | null,
  attempt: number,
  body: { promise: TrackedBody<unknown> | null },
): Promise<unknown> {
  const session = await store.open(target, meta);
  const what = `the commit of transaction ${meta.name}`;
  try {
    if (!target.sameDatabase) {
      const recorded = await fenceOther(session, env.fence, index).catch((err) => {
        throw err instanceof LeaseLostError ? env.control.storeFailed(err, what) : err;
      });
      if (recorded !== null) {
        await store.commit(session); // keeps the fence raised: a zombie's transaction commits nothing
        return checkpointAfter(env, meta, index, fingerprint, decodeStored(JSON.parse(recorded)), recorded);
      }
    }
    crashPoint('before-transaction-sql', index);
    const frame = env.frame({ index, name: meta.name, derived: 0, attempt });
    frame.gate = env.lease.gate(`transaction ${meta.name}`);
    // Tracked on its own: given up on at its timeout, 5 s after the run stopped, or once run() returned
    // and `lateCallGraceMs` passed; then its transaction is abandoned (rolled back, connection closed).
    const tracked = env.control.trackBody(
      transactionStorage.run(session, () => gated(frame, () => Promise.resolve().then(call))),
      (why) => {
        void store.abandon(session, why);
        (frame.gate as WireGate | undefined)?.revoke(why);
        frame.revoked = why;
      },
      `transaction ${meta.name}`,
    );
    body.promise = tracked;
    const ms = attemptTimeout(meta.timeoutMs, env.options.defaultTimeoutMs);
    const output = await withTimeout(Promise.race([tracked.promise, tracked.abandoned]), ms, meta.name).catch(
      (err) => {
        if (err instanceof StepTimeoutError) tracked.abandon(err);
        throw err;
      },
    );
    env.control.checkActive(false);
    const { json, value } = encodeOutput(
      output,
      `output of transaction "${meta.name}"`,
      env.options.limits.maxOutputBytes,
    );
    crashPoint('before-transaction-commit', index);
    if (!target.sameDatabase) {
      const fresh = await completeOther(session, env.fence, index, meta.name, fingerprint, json);
      if (!fresh) {
        // An earlier attempt's commit holds the row (its answer was lost): the next claim reads it back.
        throw env.control.storeFailed(new Error(`${meta.name} (step ${index}) is already committed`), what);
      }
      await commitOrStop(env, () => store.commit(session), what);
      crashPoint('after-transaction-commit', index);
      return checkpointAfter(env, meta, index, fingerprint, value, json);
    }
    const { records, seq, writes, done } = commitOf(env, meta, index, fingerprint, value, json);
    const sentAt = performance.now();
    let out: { cancelRequested: boolean };
    try {
      out = await commitOrStop(
        env,
        () =>
          env.store.steps.exclusive(env.runId, () =>
            store.commitStep(session, env.fence, done, writes, payloadOf(meta, index), index),
          ),
        what,
      );
    } catch (err) {
      env.log.abandon(seq);
      throw err;
    }
    env.lease.renewed(sentAt);
    env.log.durable(records);
    if (out.cancelRequested) env.control.cancelRequested = true;
    crashPoint('after-transaction-commit', index);
    env.control.progressed = true;
    await env.log.deliverLive(seq);
    return value;
  } finally {
    await store.rollback(session); // nothing when it committed or was abandoned
  }
}
