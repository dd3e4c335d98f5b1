/**
 * The format of the records this release writes for a run (checkpoints, commands, events, cursor), stored
 * in `ai_runs.record_format` by every statement that creates a run or starts its history anew (start,
 * debounced start, child start, schedule fire, continue-as-new). Every claim takes only runs of a format
 * up to this one (`claimableFormat`): a later release that writes records this one cannot replay raises
 * the number (on the runs it starts, and on a run before it writes such a record into it), and the
 * workers of this release then leave those runs to it during a rolling upgrade. Raise it with a
 * release that adds a record kind or changes one's meaning; never lower it. @internal
 */
export const RECORD_FORMAT = 1;

/** The claim's condition on a run of the candidates' table (`alias.` when given). @internal */
export function claimableFormat(alias?: string): string {
  return `${alias ? `${alias}.` : ''}record_format <= ${RECORD_FORMAT}`;
}
