/** All checkpoints of a run in step order: read once per claim, then replay reads memory. $1 run id */
export const LOAD_CHECKPOINTS_SQL = `
select step_index, step_name, output from ai_checkpoints where run_id = $1 order by step_index`;
