import { DurableExecutionError } from './durable-execution.error';

/** Replay met a different step than the one recorded at this index: the workflow code changed under a live run. */
export class NonDeterminismError extends DurableExecutionError {
  declare readonly code: 'DURABLE_NON_DETERMINISM';
  constructor(
    public readonly runId: string,
    public readonly stepIndex: number,
    public readonly recordedName: string,
    public readonly requestedName: string,
    /** What differed, when not the name (`with other arguments`, `was never asked for again`). */
    detail?: string,
  ) {
    super(
      'DURABLE_NON_DETERMINISM',
      (detail
        ? `Run ${runId} recorded step #${stepIndex} "${recordedName}", but on replay it ${detail}. `
        : `Run ${runId} recorded step #${stepIndex} as "${recordedName}" but the workflow now calls "${requestedName}" there. `) +
        'The run is held (status waiting, no due time) before any external call rather than re-executed: deploy ' +
        'code that replays it and retry it (RunRepository.retry). Keep the workflow deterministic (same calls, same ' +
        'arguments, values from ctx; see docs/ARCHITECTURE.md "Replay rules"), or version the workflow kind.',
    );
  }
}
