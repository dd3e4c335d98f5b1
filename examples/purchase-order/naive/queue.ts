/**
 * The naive side's message queue, in the orchestrator's memory: at-least-once delivery with a prefetch
 * limit per consumer, acknowledgement when a run finishes, and redelivery of every unacknowledged
 * message when its consumer dies (as a broker does when a consumer's connection closes). It also
 * measures, for each run a death interrupted, how long until the run was back at the step it had
 * reached: the naive run has to execute every earlier step again to get there.
 */
import type { ChildProcess } from 'node:child_process';
import type { PurchaseOrderInput } from '../purchase-order.agent';
import type { FromWorker, ToWorker } from './naive-worker';

export interface QueueMessage {
  ref: string;
  order: PurchaseOrderInput;
  deliveries: number;
  state: 'ready' | 'delivered' | 'done';
  /** Step index reached by the current delivery (-1 before the first step). */
  step: number;
  /** Set while an interrupted run has not yet got back to `interruptedStep`. */
  interruptedAt: number | null;
  interruptedStep: number;
  interruptions: number;
  recoveryDelaysMs: number[];
  firstDeliveredAt?: number;
  doneAt?: number;
  declined?: boolean;
}

interface Consumer {
  name: string;
  child: ChildProcess;
  prefetch: number;
  unacked: Map<number, QueueMessage>;
  draining: boolean;
}

export class InMemoryQueue {
  readonly messages = new Map<string, QueueMessage>();
  private readonly ready: QueueMessage[] = [];
  private readonly consumers = new Map<string, Consumer>();
  private readonly deliveries = new Map<number, { msg: QueueMessage; consumer: Consumer }>();
  private nextDelivery = 1;
  done = 0;
  redeliveries = 0;

  publish(order: PurchaseOrderInput): void {
    const msg: QueueMessage = {
      ref: order.orderRef,
      order,
      deliveries: 0,
      state: 'ready',
      step: -1,
      interruptedAt: null,
      interruptedStep: -1,
      interruptions: 0,
      recoveryDelaysMs: [],
    };
    this.messages.set(msg.ref, msg);
    this.ready.push(msg);
    this.pump();
  }

  get queued(): number {
    return this.ready.length;
  }

  get inFlight(): number {
    return this.deliveries.size;
  }

  /** A consumer process connects with a prefetch limit. */
  attach(name: string, child: ChildProcess, prefetch: number): void {
    const c: Consumer = { name, child, prefetch, unacked: new Map(), draining: false };
    this.consumers.set(name, c);
    child.on('message', (m: FromWorker) => this.onMessage(c, m));
    this.pump();
  }

  /** The consumer's process is gone: every message it had not acknowledged goes back to the queue. */
  detach(name: string): void {
    const c = this.consumers.get(name);
    if (!c) return;
    this.consumers.delete(name);
    const now = Date.now();
    const lost = [...c.unacked.entries()];
    for (const [id, msg] of lost) {
      this.deliveries.delete(id);
      msg.state = 'ready';
      if (msg.step < 0) continue; // delivered but never started: nothing was lost
      msg.interruptions++;
      if (msg.interruptedAt === null) {
        msg.interruptedAt = now;
        msg.interruptedStep = Math.max(0, msg.step);
      } else {
        msg.interruptedStep = Math.max(msg.interruptedStep, msg.step);
      }
      msg.step = -1;
    }
    this.ready.unshift(...lost.map(([, m]) => m));
    this.pump();
  }

  private onMessage(c: Consumer, m: FromWorker): void {
    if (m.type === 'draining') {
      c.draining = true;
      return;
    }
    if (m.type === 'ready') return;
    const d = this.deliveries.get(m.deliveryId);
    if (!d) return;
    const { msg } = d;
    const now = Date.now();
    if (m.type === 'step') {
      msg.step = m.index;
      if (msg.interruptedAt !== null && m.index >= msg.interruptedStep) {
        msg.recoveryDelaysMs.push(now - msg.interruptedAt);
        msg.interruptedAt = null;
      }
      return;
    }
    this.deliveries.delete(m.deliveryId);
    c.unacked.delete(m.deliveryId);
    if (m.type === 'ack') {
      msg.state = 'done';
      msg.doneAt = now;
      msg.declined = m.status === 'declined';
      this.done++;
      if (msg.interruptedAt !== null) {
        msg.recoveryDelaysMs.push(now - msg.interruptedAt);
        msg.interruptedAt = null;
      }
    } else {
      msg.state = 'ready'; // a failed run is retried from the top, like any redelivery
      msg.step = -1;
      this.ready.push(msg);
    }
    this.pump();
  }

  private pump(): void {
    while (this.ready.length) {
      let best: Consumer | undefined;
      for (const c of this.consumers.values()) {
        if (c.draining || !c.child.connected || c.unacked.size >= c.prefetch) continue;
        if (!best || c.unacked.size < best.unacked.size) best = c;
      }
      if (!best) return;
      const msg = this.ready.shift()!;
      const deliveryId = this.nextDelivery++;
      msg.deliveries++;
      msg.firstDeliveredAt ??= Date.now();
      if (msg.deliveries > 1) this.redeliveries++;
      msg.state = 'delivered';
      msg.step = -1;
      best.unacked.set(deliveryId, msg);
      this.deliveries.set(deliveryId, { msg, consumer: best });
      const out: ToWorker = { type: 'deliver', deliveryId, order: msg.order };
      best.child.send(out, undefined, {}, () => undefined); // a dead consumer is detached by its exit
    }
  }
}
