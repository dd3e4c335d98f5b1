import { PATCH_ID, patchIndex, patchMarker } from '../engine/steps/patch-step';
import { InvalidArgumentError } from '../errors/invalid-argument.error';
import type {
  KindVersionView,
  ListRunsQuery,
  PatchStatus,
  RunPage,
  RunStatus,
} from '../interfaces/run.interface';
import { RUN_STATUSES } from '../interfaces/run.interface';
import type { RunReadStore } from '../store/run-reads.store';
import { requireText } from '../util/arguments';
import { pageOfRuns } from '../util/run-cursor';
import { requireUuid } from '../util/uuid';
import { requireShortText, requireTags } from '../util/run-keys';

/** `RunRepository.list` (documented there): every filter checked, then one keyset page. @internal */
export function listRuns(reads: RunReadStore, query: ListRunsQuery): Promise<RunPage> {
  const limit = query.limit ?? 50;
  if (!Number.isInteger(limit) || limit < 1 || limit > 500)
    throw new InvalidArgumentError('limit', 'must be 1..500');
  const statuses = query.status === undefined ? null : ([] as RunStatus[]).concat(query.status);
  for (const s of statuses ?? []) {
    if (!RUN_STATUSES.includes(s))
      throw new InvalidArgumentError('status', `"${s}" is not one of ${RUN_STATUSES.join(', ')}`);
  }
  const kind = requireText(query.kind, 'kind', { optional: true });
  if (query.parentId !== undefined) requireUuid(query.parentId, 'parentId');
  const tags = requireTags(query.tags, 'tags');
  const filter = { statuses, kind: kind ?? null, parentId: query.parentId ?? null, tags };
  return pageOfRuns(query.after, limit, (after, take) => reads.list(filter, after, take));
}

/** `RunRepository.versions` (documented there). @internal */
export function kindVersions(reads: RunReadStore, kind?: string): Promise<KindVersionView[]> {
  return reads.versions(requireText(kind, 'kind', { optional: true }) ?? null);
}

/** `RunRepository.patchStatus` (documented there). @internal */
export async function patchStatusOf(
  reads: RunReadStore,
  kind: string,
  patchId: string,
): Promise<PatchStatus> {
  requireShortText(kind, 'kind');
  if (typeof patchId !== 'string' || !PATCH_ID.test(patchId))
    throw new InvalidArgumentError(
      'patchId',
      'must be 1-100 letters, digits and . _ : - (starting with a letter or digit)',
    );
  const r = await reads.patchStatus(kind, patchIndex(patchId), patchMarker(patchId));
  return {
    kind,
    patchId,
    openWithPatch: r.with_patch,
    openMayTakeOldPath: r.old,
    firstMarkedAt: r.first_marked_at,
  };
}
