/**
 * The workflow a team changes under runs in flight. Version 1 (the class it had, no `version` option):
 * triage, wait for a person's approval, fulfil. Version 2 inserts a fraud check before the wait: a
 * version-1 run's record does not replay on it (its step #1 is the wait, not "fraud_check"), so version 2
 * is a new class of the same kind and version 1 stays registered until no run holds it.
 */
import { Injectable } from '@nestjs/common';
import { DurableStep, DurableWorkflow, RunContext } from '../../src';

/** An order as the API receives it. */
export interface Order {
  ref: string;
  amount: number;
}

const fulfilMs = Number(process.env.FULFIL_MS ?? 400);

@Injectable()
export class OrderSteps {
  @DurableStep({ name: 'triage', kind: 'tool' })
  async triage(order: Order) {
    return { priority: order.amount > 500 ? 'high' : 'normal' };
  }

  @DurableStep({ name: 'fraud_check', kind: 'tool' })
  async fraudCheck(order: Order) {
    return { risk: order.amount > 900 ? 'review' : 'low' };
  }

  /** The slow step: a deploy that stops a pod meets runs in the middle of it. */
  @DurableStep({ name: 'fulfil', kind: 'tool' })
  async fulfil(order: Order, priority: string) {
    await new Promise((r) => setTimeout(r, fulfilMs));
    return { shipped: order.ref, priority };
  }
}

@DurableWorkflow('order')
export class OrderV1 {
  constructor(private readonly steps: OrderSteps) {}
  async run(order: Order, ctx: RunContext) {
    const { priority } = await this.steps.triage(order);
    await ctx.waitForSignal('approve');
    const shipped = await this.steps.fulfil(order, priority);
    return { path: 'v1', ...shipped };
  }
}

@DurableWorkflow('order', { version: 2 })
export class OrderV2 {
  constructor(private readonly steps: OrderSteps) {}
  async run(order: Order, ctx: RunContext) {
    const { priority } = await this.steps.triage(order);
    const { risk } = await this.steps.fraudCheck(order);
    await ctx.waitForSignal('approve');
    const shipped = await this.steps.fulfil(order, priority);
    return { path: 'v2', risk, ...shipped };
  }
}
