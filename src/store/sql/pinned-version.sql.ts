/**
 * The version a run is pinned to, in SQL: `kind_version`, or 1 for a run claimed before versions
 * existed (no version, epoch above 0); null for a run no claim pinned yet. `alias`: the runs table's
 * alias in the statement ('' for none). RunView.version reads the same rule (run-row.mapper.ts).
 */
export const pinnedVersion = (alias = ''): string => {
  const a = alias ? `${alias}.` : '';
  return `coalesce(${a}kind_version, case when ${a}epoch > 0 then 1 end)`;
};
