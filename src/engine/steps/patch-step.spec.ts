import type { CommandRow, RecordedStep } from '../../store/run-state/load-replay';
import { ReplayLog } from '../replay-log';
import { patchedStep, patchIndex, patchMarker } from './patch-step';
import type { StepEnv } from './step-env';

const at = (name: string, epoch?: number, output: unknown = name): RecordedStep => ({
  name,
  output,
  seq: null,
  fingerprint: null,
  ...(epoch === undefined ? {} : { epoch }),
});
const marker = (answer: boolean, epoch?: number): [number, RecordedStep] => [
  patchIndex('p'),
  at(patchMarker('p'), epoch, answer),
];

/** A claim replaying `recorded` (and commands reserved at `reserved`), as `patchedStep` sees it. */
function claim(recorded: [number, RecordedStep][], reserved: number[] = []) {
  const log = new ReplayLog(
    new Map(recorded),
    () => new Error('non-determinism'),
    new Map(reserved.map((i) => [i, { index: i, name: 'cmd' } as CommandRow])),
  );
  const env = { log, control: { checkActive: () => undefined } } as unknown as StepEnv;
  return {
    log,
    /** `ctx.patched('p')` at the next position, then `steps` positions taken (a loop iteration's calls). */
    patched: (steps = 1) => {
      const answer = patchedStep(env, 'p');
      for (let i = 0; i < steps; i++) log.allocIndex();
      return answer;
    },
    pending: () => log.takePending().map((p) => [p.name, p.outputJson]),
  };
}

/** ctx.patched (issue 35): the first answer for an id stands for the whole run, and is recorded. */
describe('patchedStep', () => {
  it('a run at the end of its record takes the new path at every call, and records true', () => {
    const c = claim([]);
    expect([c.patched(), c.patched(), c.patched()]).toEqual([true, true, true]);
    expect(c.pending()).toEqual([['$patch:p', 'true']]);
  });

  it('a run whose record goes past the first call takes the old path at every later call too', () => {
    const c = claim([
      [0, at('old', 1)],
      [1, at('$deadline:next', 1)],
    ]);
    expect(c.patched(3)).toBe(false); // iteration 0 (recorded on the old code)
    expect(c.pending()).toEqual([['$patch:p', 'false']]);
    c.log.durable(c.log.takePending()); // the marker was written by the next write
    expect([c.patched(3), c.patched(3)]).toEqual([false, false]); // iterations 1, 2: past the record's end
    expect(c.pending()).toEqual([]);
  });

  it('a command reserved past the call (no result recorded yet) counts as passed', () => {
    expect(claim([], [0]).patched()).toBe(false);
  });

  it('a recorded false marker answers false at every call, a true one true', () => {
    const old = claim([marker(false, 2), [0, at('old', 1)]]);
    expect([old.patched(3), old.patched(3), old.patched(3)]).toEqual([false, false, false]);
    const fresh = claim([marker(true, 1), [0, at('new', 1)]]);
    expect([fresh.patched(3), fresh.patched(3)]).toEqual([true, true]);
    expect([...old.pending(), ...fresh.pending()]).toEqual([]); // nothing more to write
  });

  it('a true marker written after the old path was recorded (an earlier release, mid-loop): false before it, true from it on', () => {
    // Epoch 1 recorded iteration 0 on the old code; epoch 2 wrote the marker at iteration 1 (position 3).
    const c = claim([
      [0, at('old', 1)],
      [1, at('$deadline:next', 1)],
      [2, at('$signal:next', 2)],
      marker(true, 2),
      [3, at('new', 2)],
      [4, at('$deadline:next', 2)],
    ]);
    expect([c.patched(3), c.patched(3), c.patched(3)]).toEqual([false, true, true]);
    // Exported before checkpoints carried their epoch: the marker answers true wherever it is, as it did.
    const unknown = claim([
      [0, at('old')],
      [patchIndex('p'), at(patchMarker('p'), undefined, true)],
    ]);
    expect(unknown.patched()).toBe(true);
  });
});
