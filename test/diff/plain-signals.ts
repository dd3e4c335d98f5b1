/**
 * The plain run's signals (plain.ts says what they mean): the mailbox of each name, the line of waits
 * of each name (FIFO), the wait primitive, and the script of signals the test sends one after the other.
 */
import { OpFailure, type Out, type Prims } from './interpret';
import { signalScript, type DiffCase, type SignalName } from './program';
import type { Occurrence } from './plain';

/** What the signals use of the simulator. */
export interface SignalSim {
  now(): number;
  occurrences: Occurrence[];
  schedule(
    time: number,
    what: string,
    wait: boolean,
    fire: () => void,
    key?: number,
    parent?: number | null,
  ): void;
  called(label: string, at: number): boolean;
  loser(label: string): boolean;
  tags: Set<string>;
}

interface Waiter {
  label: string;
  done: boolean;
  resolve: (o: Out) => void;
}

export function plainSignals(sim: SignalSim, c: DiffCase): Prims['wait'] {
  const { tags } = sim;
  /** Signals not taken yet; `key`: when each was sent (its time, then the sender's order). */
  const mailbox: Record<SignalName, { v: string; key: number }[]> = { a: [], b: [] };
  const line: Record<SignalName, Waiter[]> = { a: [], b: [] };

  // The test sends the signals one after the other: each is ordered after the one before.
  let sender: number | null = null;
  for (const [k, s] of signalScript(c).entries()) {
    const id = sim.occurrences.length;
    const key = s.at + k / 1000;
    const fire = () => {
      const w = line[s.name].shift();
      if (!w) return void mailbox[s.name].push({ v: s.v, key });
      w.done = true;
      w.resolve({ v: s.v, t: sim.now() });
    };
    sim.schedule(s.at, `signal ${s.v}`, true, fire, key, sender);
    sim.occurrences[id].signal = s.index;
    sender = id;
  }

  return (label, name, timeout, at) =>
    new Promise((resolve, reject) => {
      if (!sim.called(label, at)) return;
      const kind = timeout === null ? 'signal wait without timeout' : 'signal wait with timeout';
      const now = sim.now();
      const taken = mailbox[name].shift();
      if (taken) {
        // Ready now; delivered in the order it happened (when it was sent) among what is ready now.
        const got = () => {
          tags.add(`${kind}: got a signal`).add('signal before wait');
          resolve({ v: taken.v, t: now });
        };
        return sim.schedule(now, `mailbox ${label}`, true, got, taken.key);
      }
      if (line[name].length) tags.add('two waits of one name pending (FIFO)');
      const w: Waiter = {
        label,
        done: false,
        resolve: (o) => {
          tags.add(`${kind}: got a signal`);
          if (sim.loser(label)) tags.add('loser signal wait took a later signal');
          resolve(o);
        },
      };
      line[name].push(w);
      if (timeout !== null)
        sim.schedule(now + timeout, `timeout ${label}`, true, () => {
          if (w.done) return;
          w.done = true;
          line[name].splice(line[name].indexOf(w), 1);
          tags.add('signal wait timed out');
          reject(new OpFailure('timeout', sim.now()));
        });
    });
}
