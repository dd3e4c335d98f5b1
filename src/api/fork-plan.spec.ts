import { ForkRefusedError } from '../errors/fork-refused.error';
import type { ForkPlanRead, ForkPosition } from '../store/fork/run-fork.store';
import { planCut } from './fork-plan';

const ID = '00000000-0000-4000-8000-000000000001';

/** A run as FORK_PLAN_SQL reads it: positions [index, name, seq, child?]. */
function run(positions: Array<[number, string, number | null, string?]>, extra: Partial<ForkPlanRead> = {}) {
  return {
    id: ID,
    kind: 'k',
    status: 'failed',
    epoch: 3,
    rowVersion: '1',
    version: 1,
    generation: 0,
    cancelRequested: false,
    positions: positions.map(([index, name, seq, child]): ForkPosition => ({
      index,
      name,
      seq,
      child: child ?? null,
    })),
    commands: [],
    childEnds: [],
    ...extra,
  } as ForkPlanRead;
}

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e as ForkRefusedError;
  }
  throw new Error('not refused');
};

describe('planCut (RunRepository.fork before anything is written)', () => {
  it('accepts every cut of a sequential run, with recorded values as positions', () => {
    const r = run([
      [0, '$uuid', null],
      [1, 'think', 0],
      [2, 'command:act', 1],
      [3, '$now', null],
      [4, 'think', 2],
    ]);
    for (let k = 0; k <= 5; k++)
      expect(planCut(r, k, undefined, undefined)).toEqual({ childEnds: [], edit: null });
  });

  it('refuses a cut through a concurrent group and names the nearest cuts on both sides', () => {
    // 1 and 2 started together, 2 delivered first; 3 after both.
    const r = run([
      [0, 'a', 0],
      [1, 'slow', 2],
      [2, 'fast', 1],
      [3, 'b', 3],
    ]);
    expect(planCut(r, 1, undefined, undefined).edit).toBeNull();
    expect(planCut(r, 3, undefined, undefined).edit).toBeNull();
    const e = refusal(() => planCut(r, 2, undefined, undefined));
    expect(e).toBeInstanceOf(ForkRefusedError);
    expect(e).toMatchObject({ reason: 'concurrent', position: 1 });
    expect(e.message).toContain('step 1 (slow) reached the workflow after step 2 (fast)');
    expect(e.message).toContain('Fork from step 1 or 3');
  });

  it('orders rows without a seq (recorded before seq existed) by index, as replay does', () => {
    expect(
      planCut(
        run([
          [0, 'a', null],
          [1, 'b', null],
        ]),
        1,
        undefined,
        undefined,
      ).edit,
    ).toBeNull();
  });

  it('refuses an unsettled command before the cut, not one at or after it', () => {
    const r = run([[0, 'think', 0]], {
      commands: [{ key: `run_${ID}:step_1:pay`, index: 1, status: 'in_doubt', name: 'pay' }],
    });
    expect(planCut(r, 1, undefined, undefined).edit).toBeNull();
    const e = refusal(() => planCut(r, 2, undefined, undefined));
    expect(e).toMatchObject({ reason: 'unsettled-command', commandKey: `run_${ID}:step_1:pay`, position: 1 });
    expect(e.message).toContain('resolveCommand');
  });

  it('copies the end of an ended child whose wait is not inherited; refuses a running one', () => {
    const child = '00000000-0000-4000-8000-00000000000c';
    const r = run([
      [0, '$child:kid', 0, child],
      [1, 'x', 1],
      [2, `$child:${child}`, 2],
    ]);
    expect(planCut(r, 3, undefined, undefined).childEnds).toEqual([]);
    expect(planCut({ ...r, childEnds: [`$child:${child}`] }, 2, undefined, undefined).childEnds).toEqual([
      `$child:${child}`,
    ]);
    expect(refusal(() => planCut(r, 2, undefined, undefined))).toMatchObject({
      reason: 'running-child',
      childId: child,
    });
  });

  it('edits only the last inherited delivery; a command edit is recorded as its success', () => {
    const r = run([
      [0, 'think', 0],
      [1, 'command:act', 1],
      [2, '$now', null],
    ]);
    expect(planCut(r, 3, undefined, { step: 1, valueJson: '{"ok":true}' }).edit).toEqual({
      index: 1,
      outputJson: '{"status":"succeeded","result":{"ok":true}}',
    });
    expect(planCut(r, 1, undefined, { step: 0, valueJson: '"x"' }).edit).toEqual({
      index: 0,
      outputJson: '"x"',
    });
    expect(() => planCut(r, 3, undefined, { step: 0, valueJson: '1' })).toThrow(/must be 1, the last step/);
    expect(() => planCut(run([[0, '$signal:go', 0]]), 1, undefined, { step: 0, valueJson: '1' })).toThrow(
      /only a step's or a command's result/,
    );
  });

  it("needs a choice about a live original, refuses 'cancel' of an ended or cancelling one", () => {
    expect(() => planCut(run([], { status: 'running' }), 0, undefined, undefined)).toThrow(
      /original is required/,
    );
    expect(planCut(run([], { status: 'running' }), 0, 'leave', undefined).edit).toBeNull();
    expect(() => planCut(run([]), 0, 'cancel', undefined)).toThrow(/is failed already/);
    expect(() =>
      planCut(run([], { status: 'running', cancelRequested: true }), 0, 'cancel', undefined),
    ).toThrow(/being cancelled already/);
    expect(() => planCut(run([[0, 'a', 0]]), 2, undefined, undefined)).toThrow(/fork from 1 at most/);
  });
});
