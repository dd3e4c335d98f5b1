/**
 * `nestjs-durable-execution/admin`: the opt-in admin REST API and run inspector (`DurableAdminModule`),
 * its guard and login sessions, its OpenAPI helper and the bodies of its REST API. See docs/OPERATIONS.md
 * ("The admin module and its guard", "The run inspector"). It works beside the package root's
 * `DurableExecutionModule`: import both.
 * @packageDocumentation
 */
export { DurableAdminModule } from './durable-admin.module';
export type {
  DurableAdminLoginOptions,
  DurableAdminModuleAsyncOptions,
  DurableAdminModuleOptions,
  DurableAdminOpenApiOptions,
  DurableSecurityScheme,
} from './admin-options.interface';
export { addDurableAdminSecurity } from './admin-openapi';
export type { OpenApiDocumentLike } from './admin-openapi';
export { DURABLE_ADMIN_CSRF_HEADER, DURABLE_ADMIN_SESSION_COOKIE } from './login/admin-session';
export { ApiKeyAdminGuard } from './api-key-admin.guard';
export type { ApiKeyAdminGuardOptions, ApiKeyHolder } from './api-key-admin.guard';
export { isDurableAdminAction } from './admin-access.guard';
export { DURABLE_OPERATOR } from './admin.constants';
// Bodies of the admin REST API (GET api/runs, api/runs/:id and its events, checkpoints, changes,
// api/stats; 400 field errors).
export type {
  AdminRunSummary,
  AdminRunPage,
  AdminRunDetail,
  AdminRunHistoryPage,
  AdminRunChanges,
} from './admin-runs.service';
export type { RunTimeline, EpochSection, EpochStart, StepRow } from './run-timeline';
export type { FieldError } from './admin-validation.pipe';
export type { RunStats } from '../store/run-stats.reader';
// Thrown at boot: a peer dependency the module needs is not installed; its mount does not fit the app.
export { MissingDependencyError } from '../errors/missing-dependency.error';
export { MountMismatchError } from '../errors/mount-mismatch.error';
