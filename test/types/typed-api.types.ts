/**
 * Type tests of the public API (checked by test/types/typed-api.spec.ts, never run). Every line marked
 * `@ts-expect-error <fragment>` must fail to compile with a message containing <fragment>; every other
 * line must compile. `Equal` assertions pin the types the compiler infers.
 */
import {
  CheckpointService,
  DurableStep,
  DurableWorkflow,
  IdempotentCommand,
  RunContext,
  RunRepository,
  type Jsonify,
  type Stored,
  type WorkflowOutput,
  type WorkflowSignals,
} from '../../src';

type Equal<A, B> = (<G>() => G extends A ? 1 : 2) extends <G>() => G extends B ? 1 : 2 ? true : false;
const assertType = <T extends true>(): T => true as T;

interface ApprovalSignals {
  approve: { by: string };
  reject: { reason: string };
}

interface OrderInput {
  orderId: string;
  lines: Array<{ sku: string; qty: number }>;
  note?: string;
}

/** A helper of the app's that takes any context: a typed one passes. */
async function audit(ctx: RunContext): Promise<string> {
  return ctx.uuid();
}

@DurableWorkflow('typed-order')
export class OrderWorkflow {
  async run(input: OrderInput, ctx: RunContext<ApprovalSignals>): Promise<{ total: number; at: Date }> {
    await audit(ctx);
    const decision = await ctx.waitForSignal('approve');
    assertType<Equal<typeof decision, { by: string }>>();
    const rejected = await ctx.waitForSignal('reject', { timeoutMs: 1000 });
    assertType<Equal<typeof rejected, { reason: string }>>();
    void rejected;
    // @ts-expect-error '"aprove"' is not assignable to parameter of type 'keyof ApprovalSignals'
    await ctx.waitForSignal('aprove');
    // An explicit payload type is for untyped contexts only: here the declaration decides.
    // @ts-expect-error '"approve"' is not assignable to parameter of type 'never'
    await ctx.waitForSignal<{ by: number }>('approve');
    // @ts-expect-error Property 'reason' does not exist on type '{ by: string; }'
    void decision.reason;
    return { total: input.lines.length, at: new Date() };
  }
}

@DurableWorkflow('typed-untyped')
export class UntypedWorkflow {
  async run(input: { n: number }, ctx: RunContext): Promise<number> {
    const any = await ctx.waitForSignal('anything');
    assertType<Equal<typeof any, unknown>>();
    void any;
    const named = await ctx.waitForSignal<{ n: number }>('go');
    assertType<Equal<typeof named, { n: number }>>();
    return input.n + named.n;
  }
}

@DurableWorkflow('typed-no-context')
export class NoContextWorkflow {
  async run(input: { when: string }): Promise<string> {
    return input.when;
  }
}

@DurableWorkflow('typed-date-input')
export class DateInputWorkflow {
  async run(input: { due: Date }): Promise<null> {
    void input;
    return null;
  }
}

// What storing does to a type.
assertType<
  Equal<Jsonify<{ at: Date; n: number; f(): void; o?: string }>, { at: string; n: number; o?: string }>
>();
assertType<Equal<Jsonify<Array<{ d: Date }>>, Array<{ d: string }>>>();
assertType<Equal<Stored<OrderInput>, OrderInput>>();
assertType<Equal<WorkflowOutput<typeof OrderWorkflow>, { total: number; at: string }>>();
assertType<Equal<WorkflowOutput<typeof UntypedWorkflow>, number>>();
assertType<Equal<WorkflowSignals<typeof OrderWorkflow>, ApprovalSignals>>();

class StampSteps {
  @DurableStep()
  async stamp(): Promise<{ at: Date; n: number }> {
    return { at: new Date(), n: 1 };
  }
}

export async function checkpoints(cps: CheckpointService, id: string): Promise<void> {
  // A step's recorded outputs, typed as stored: the Date it returned reads back as a string.
  const [first] = await cps.outputsOf(id, StampSteps.prototype.stamp);
  assertType<Equal<typeof first, { at: string; n: number }>>();
  // @ts-expect-error Type 'string' is not assignable to type 'Date'
  const at: Date = first.at;
  void at;
}

export async function callers(runs: RunRepository, id: string): Promise<void> {
  // start: the input is checked against run()'s, and must be stored unchanged.
  const started = await runs.start(OrderWorkflow, { orderId: 'o-1', lines: [{ sku: 'a', qty: 1 }] });
  const out = await started.result();
  assertType<Equal<typeof out, { total: number; at: string }>>();
  void out;
  // @ts-expect-error Property 'lines' is missing
  await runs.start(OrderWorkflow, { orderId: 'o-1' });
  // @ts-expect-error Type 'number' is not assignable to type 'string'
  await runs.start(OrderWorkflow, { orderId: 1, lines: [] });
  // @ts-expect-error this type does not survive storage as JSON
  await runs.start(DateInputWorkflow, { due: new Date() });
  // A workflow whose input type storing would change cannot be started at all: fix its type.
  // @ts-expect-error this type does not survive storage as JSON
  await runs.start(DateInputWorkflow, { due: new Date().toISOString() });
  await runs.start(NoContextWorkflow, { when: 'now' });

  // result: typed by the class, as stored.
  const total: number = (await runs.result(OrderWorkflow, id)).total;
  const at: string = (await runs.result(OrderWorkflow, id)).at;
  // @ts-expect-error Type 'string' is not assignable to type 'Date'
  const atDate: Date = (await runs.result(OrderWorkflow, id)).at;
  // @ts-expect-error Type 'number' is not assignable to type 'string'
  const wrong: string = await runs.result(UntypedWorkflow, id);
  void [total, at, atDate, wrong];

  // signal: the name and the payload are the workflow's.
  await runs.signal(OrderWorkflow, id, 'approve', { by: 'ann' });
  await runs.signal(OrderWorkflow, id, 'reject', { reason: 'too dear' }, 'ops');
  // @ts-expect-error '"aprove"' is not assignable to parameter of type 'keyof ApprovalSignals'
  await runs.signal(OrderWorkflow, id, 'aprove', { by: 'ann' });
  // @ts-expect-error Type 'number' is not assignable to type 'string'
  await runs.signal(OrderWorkflow, id, 'approve', { by: 42 });
  // @ts-expect-error 'reason' does not exist in type '{ by: string; }'
  await runs.signal(OrderWorkflow, id, 'approve', { reason: 'x' });
  // The payload is required (a signal without one declares `null`); the message is the last overload's.
  // @ts-expect-error Argument of type 'typeof OrderWorkflow' is not assignable to parameter of type 'string'
  await runs.signal(OrderWorkflow, id, 'approve');
  // An untyped workflow or a run id alone: any name, any JSON payload.
  await runs.signal(UntypedWorkflow, id, 'go', { n: 1 });
  await runs.signal(id, 'approve', { anything: true });
}

/** A command's own key is a function of its typed arguments, returning a string (or undefined). */
export class Refunds {
  @IdempotentCommand<{ orderId: string }>({
    name: 'refund',
    inDoubt: 'lookup',
    key: (a) => `refund-${a.orderId}`,
  })
  refund(a: { orderId: string }) {
    return a.orderId;
  }
  // @ts-expect-error Property 'order' does not exist on type '{ orderId: string; }'
  @IdempotentCommand<{ orderId: string }>({ name: 'refund2', inDoubt: 'lookup', key: (a) => a.order })
  refund2(a: { orderId: string }) {
    return a.orderId;
  }
  // @ts-expect-error Type 'number' is not assignable to type 'string'
  @IdempotentCommand<{ n: number }>({ name: 'refund3', inDoubt: 'lookup', key: (a) => a.n })
  refund3(a: { n: number }) {
    return a.n;
  }
}
