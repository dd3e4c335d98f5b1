import { callFingerprint, argsJson } from './call-fingerprint';
import { RecordedStep, ReplayLog } from './replay-log';

const step = (name: string, seq: number | null): RecordedStep => ({
  name,
  output: name,
  seq,
  fingerprint: null,
});

describe('ReplayLog', () => {
  it('hands recorded results over in their recorded delivery order, not in the order asked for', async () => {
    // Indexes 0..2 were delivered in the order 2, 0, 1 the first time.
    const log = new ReplayLog(
      new Map([
        [0, step('a', 11)],
        [1, step('b', 12)],
        [2, step('c', 10)],
      ]),
      () => undefined,
    );
    const seen: number[] = [];
    await Promise.all([0, 1, 2].map((i) => log.replayed(i).then(() => seen.push(i))));
    expect(seen).toEqual([2, 0, 1]);
    expect(log.replaying).toBe(false);
  });

  it('recorded values (ctx.now/uuid, deadlines) are not deliveries and never wait', async () => {
    const log = new ReplayLog(new Map([[0, step('$uuid', null)]]), () => undefined);
    expect(log.replaying).toBe(false);
    await expect(log.replayed(0)).resolves.toBeUndefined();
  });

  it('live work waits for the end of replay; new results take seqs after every recorded one', async () => {
    const log = new ReplayLog(new Map([[0, step('a', 4)]]), () => undefined);
    let live = false;
    const done = log.replayDone()!.then(() => (live = true));
    await new Promise((r) => setImmediate(r));
    expect(live).toBe(false);
    await log.replayed(0);
    await done;
    expect(live).toBe(true);
    expect(log.takeSeq()).toBe(5);
  });

  it('a live result whose commit came back early waits for the earlier ones; an abandoned seq is skipped', async () => {
    const log = new ReplayLog(new Map(), () => undefined);
    const [s0, s1, s2] = [log.takeSeq(), log.takeSeq(), log.takeSeq()];
    const order: number[] = [];
    const p2 = log.deliverLive(s2).then(() => order.push(s2));
    const p1 = log.deliverLive(s1).then(() => order.push(s1));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    log.abandon(s0);
    await Promise.all([p1, p2]);
    expect(order).toEqual([s1, s2]);
  });

  it('a recorded result never asked for again stalls replay and is reported as non-determinism', async () => {
    jest.useFakeTimers();
    try {
      const stalled: Array<[number, string]> = [];
      const log = new ReplayLog(
        new Map([
          [0, step('a', 0)],
          [1, step('b', 1)],
        ]),
        (i, name) => stalled.push([i, name]),
      );
      void log.replayDone();
      jest.advanceTimersByTime(0); // the pump's turn (setImmediate is faked too)
      jest.runOnlyPendingTimers();
      jest.advanceTimersByTime(1500);
      expect(stalled).toEqual([[0, 'a']]);
    } finally {
      jest.useRealTimers();
    }
  });

  it('fingerprints ignore key order (jsonb reorders keys) but not values', () => {
    const fp = (v: unknown) => callFingerprint('s', argsJson([v]));
    expect(fp({ a: 1, b: { c: 2, d: 3 } })).toBe(fp({ b: { d: 3, c: 2 }, a: 1 }));
    expect(fp({ a: 1 })).not.toBe(fp({ a: 2 }));
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    expect(fp(circular)).toBeNull();
  });
});
