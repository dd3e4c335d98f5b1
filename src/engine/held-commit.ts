import type { RunCursor } from '../interfaces/run.interface';
import type { CheckpointWrite } from '../store/run-state/fence';
import type { RunStateStore } from '../store/run-state/run-state.store';
import { crashPoint } from './crash-points';
import { fencedWrite, Writer } from './fenced-write';
import type { RunControl } from './run-control';

const noop = (): void => undefined;

/** A step's commit held back: what STEP_WRITE_SQL would write for it. @internal */
export interface HeldCommit {
  index: number;
  checkpoint: CheckpointWrite;
  cursor: RunCursor;
  payload: Record<string, unknown>;
}

/**
 * The last step's commit, fused into the finish (docs/PERFORMANCE.md, issue 38). A step that ends
 * while it is the run's only live call, with no wait pending, hands its result to the workflow before
 * its commit is sent and is held here. The workflow's code then runs until its next await: if `run()`
 * returned (the finish takes it, one statement for both), the commit rides on the finish; anything
 * else the engine does first writes it alone (every fenced write, a step body, a command's lookup or
 * dispatch), and so does the next event-loop turn if `run()` is still going. So nothing the engine
 * sends or starts ever sees a result that is not durable, and no await of the workflow outlives it.
 * @internal
 */
export class HeldStep {
  private held: HeldCommit | null = null;
  private writing: Promise<void> | null = null;
  /** The phase's code returned or threw: what is held waits for the finish (which takes it). */
  phaseEnded = false;

  constructor(private readonly writeAlone: (c: HeldCommit) => Promise<void>) {}

  /** Holds `c` until the finish takes it, or until the next turn or the next write of the run. */
  hold(c: HeldCommit): void {
    this.held = c;
    setImmediate(() => {
      if (!this.phaseEnded) this.flush()?.catch(noop);
    });
  }

  /** Writes what is held, alone; resolves once it (or one already under way) is durable. */
  flush(): Promise<void> | undefined {
    const c = this.held;
    if (!c) return this.writing ?? undefined;
    this.held = null;
    const w: Promise<void> = this.writeAlone(c).finally(() => {
      if (this.writing === w) this.writing = null;
    });
    w.catch(noop);
    this.writing = w;
    return w;
  }

  /** For the finish: what is held (now the finish's to write), after a write alone under way ended. */
  async take(): Promise<HeldCommit | null> {
    if (this.writing) await this.writing.catch(noop);
    const c = this.held;
    this.held = null;
    return c;
  }
}

/** The held commit written alone: the step write it would have been, carrying the values pending. */
export async function writeHeld(
  run: Writer & { readonly store: RunStateStore; readonly fence: Parameters<RunStateStore['writeStep']>[0] },
  c: HeldCommit,
): Promise<void> {
  const records = run.log.takePending();
  crashPoint('before-step-commit', c.index);
  await fencedWrite(
    run,
    () =>
      run.store.writeStep(
        run.fence,
        c.cursor,
        [...records, c.checkpoint],
        'run.checkpoint_saved',
        c.payload,
        true,
      ),
    'run.checkpoint_saved',
    records,
    false,
  );
  crashPoint('after-step-commit', c.index);
}

/**
 * Before a new call of the run starts (a step body, a command, a child's start, an emit): a held
 * commit is written first, and a cancel it reported stops the call there, as it would have stopped it
 * had the commit been sent on its own. Undefined (no await) when nothing is held.
 * @internal
 */
export function flushBeforeCall(env: {
  readonly held: HeldStep;
  readonly control: Pick<RunControl, 'checkActive'>;
}): Promise<void> | undefined {
  return env.held.flush()?.then(() => env.control.checkActive());
}
