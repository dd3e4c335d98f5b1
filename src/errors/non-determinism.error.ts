import { DurableExecutionError } from './durable-execution.error';

/** Replay met a different step than the one recorded at this index: the workflow code changed under a live run. */
export class NonDeterminismError extends DurableExecutionError {
  constructor(
    public readonly runId: string,
    public readonly stepIndex: number,
    public readonly recordedName: string,
    public readonly requestedName: string,
  ) {
    super(
      'DURABLE_NON_DETERMINISM',
      `Run ${runId} recorded step #${stepIndex} as "${recordedName}" but the workflow now calls "${requestedName}" there. ` +
        'The run was failed rather than re-executed. Keep step order stable for live runs, or version the workflow kind.',
    );
  }
}
