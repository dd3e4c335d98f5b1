import {
  Get,
  Headers,
  MessageEvent,
  NotFoundException,
  Param,
  Query,
  Req,
  Sse,
  UseFilters,
  UseGuards,
  UsePipes,
} from '@nestjs/common';
import type { Observable } from 'rxjs';
import { AdminAccessGuard } from '../admin-access.guard';
import { AdminErrorFilter } from '../admin-error.filter';
import { AdminRedactor } from '../admin-redactor';
import { RunNotFoundError } from '../../errors/run-not-found.error';
import type { CheckpointView, KindVersionView, PatchStatus, RunEvent } from '../../interfaces/run.interface';
import { RunRepository } from '../../api/run.repository';
import type { SseSocket } from '../../api/run-sse';
import { PatchStatusQueryDto, VersionsQueryDto } from '../dto/run-actions.dto';
import type { CommandView } from '../../interfaces/command.interface';
import {
  AdminRunChanges,
  AdminRunDetail,
  AdminRunHistoryPage,
  AdminRunPage,
  AdminRunsService,
} from '../admin-runs.service';
import { adminValidationPipe } from '../admin-validation.pipe';
import { ListRunsQueryDto } from '../dto/list-runs-query.dto';
import { RunChangesQueryDto, RunDetailQueryDto, RunHistoryQueryDto } from '../dto/run-history-query.dto';
import {
  ApiBadRequestResponse,
  ApiForbiddenResponse,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  ApiUnauthorizedResponse,
} from '../../nest/openapi';
import { runIdPipe, stepIndexPipe } from './uuid-param.pipe';

/**
 * Reads: `GET <path>/api/runs`, `GET <path>/api/stats`, `GET <path>/api/versions`, `GET
 * <path>/api/patch-status?kind=&patchId=`, `GET <path>/api/runs/:id` and its `events`,
 * `checkpoints`, `changes` and `stream` (Server-Sent Events). Mounted by DurableAdminModule.
 */
@ApiTags('durable-admin')
@ApiUnauthorizedResponse({ description: 'The guard wants credentials' })
@ApiForbiddenResponse({ description: 'The guard refused' })
@UseGuards(AdminAccessGuard)
@UsePipes(adminValidationPipe())
@UseFilters(AdminErrorFilter)
export class DurableRunsApiController {
  constructor(
    private readonly admin: AdminRunsService,
    private readonly runs: RunRepository,
    private readonly redactor: AdminRedactor,
  ) {}

  @Get('runs')
  @ApiOperation({ summary: 'List runs, newest first (keyset pagination: pass `next` as `after`)' })
  @ApiBadRequestResponse({ description: 'A filter is invalid: `errors` names each field' })
  list(@Query() query: ListRunsQueryDto): Promise<AdminRunPage> {
    return this.admin.list(query);
  }

  @Get('stats')
  @ApiOperation({ summary: 'Runs by status, in-doubt commands, due backlog' })
  stats() {
    return this.admin.stats();
  }

  @Get('versions')
  @ApiOperation({
    summary: 'Versions of each kind: unfinished runs pinned to each, and the live workers that run it',
  })
  versions(@Query() query: VersionsQueryDto): Promise<KindVersionView[]> {
    return this.runs.versions(query.kind);
  }

  @Get('patch-status')
  @ApiOperation({
    summary:
      "Where a kind's open runs stand with a ctx.patched(patchId): on the new path, or may take the old",
  })
  @ApiBadRequestResponse({ description: 'A bad kind or patchId: `errors` names each field' })
  patchStatus(@Query() query: PatchStatusQueryDto): Promise<PatchStatus> {
    return this.runs.patchStatus(query.kind, query.patchId);
  }

  @Get('runs/:id')
  @ApiOperation({
    summary:
      'One run with its cursor, newest events, checkpoints and commands (`limit`, default 200) and timeline',
  })
  @ApiOkResponse({
    description: 'The run; `eventsBefore`/`checkpointsBefore`/`commandsBefore` page back to older ones',
  })
  @ApiBadRequestResponse({ description: 'A bad id or limit: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  get(@Param('id', runIdPipe()) id: string, @Query() query: RunDetailQueryDto): Promise<AdminRunDetail> {
    return this.admin.detail(id, query.limit);
  }

  @Get('runs/:id/events')
  @ApiOperation({
    summary: "A page of the run's events by id: `after` oldest first, `before` newest first (pass `next` on)",
  })
  @ApiOkResponse({ description: '`{ items, next? }`' })
  @ApiBadRequestResponse({ description: 'A bad id, after, before or limit: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  events(
    @Param('id', runIdPipe()) id: string,
    @Query() query: RunHistoryQueryDto,
  ): Promise<AdminRunHistoryPage<RunEvent>> {
    return this.admin.events(id, query);
  }

  @Get('runs/:id/checkpoints')
  @ApiOperation({
    summary: "A page of the run's checkpoints by step index: `after` in step order, `before` newest first",
  })
  @ApiOkResponse({ description: '`{ items, next? }`' })
  @ApiBadRequestResponse({ description: 'A bad id, after, before or limit: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  checkpoints(
    @Param('id', runIdPipe()) id: string,
    @Query() query: RunHistoryQueryDto,
  ): Promise<AdminRunHistoryPage<CheckpointView>> {
    return this.admin.checkpoints(id, query);
  }

  @Get('runs/:id/checkpoints/:stepIndex')
  @ApiOperation({
    summary:
      'One checkpoint with its output and meta whole (a run detail shows a large one as `{ $truncated, bytes, fetch }`)',
  })
  @ApiBadRequestResponse({ description: 'A bad id or stepIndex: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id, or no checkpoint at this step' })
  async checkpoint(
    @Param('id', runIdPipe()) id: string,
    @Param('stepIndex', stepIndexPipe()) step: string,
  ): Promise<CheckpointView> {
    const stepIndex = Number(step);
    const [c] = await this.runs.checkpoints(id, { before: stepIndex + 1, limit: 1 });
    if (c?.stepIndex === stepIndex) return this.redactor.checkpoint(c);
    if (!(await this.runs.get(id))) throw new RunNotFoundError(id);
    throw new NotFoundException({
      statusCode: 404,
      code: 'DURABLE_CHECKPOINT_NOT_FOUND',
      message: `Run ${id} has no checkpoint at step ${stepIndex} (GET api/runs/${id}/checkpoints lists them).`,
    });
  }

  @Get('runs/:id/commands')
  @ApiOperation({
    summary: "A page of the run's commands by step index: `after` in step order, `before` newest first",
  })
  @ApiOkResponse({ description: '`{ items, next? }`' })
  @ApiBadRequestResponse({ description: 'A bad id, after, before or limit: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  commands(
    @Param('id', runIdPipe()) id: string,
    @Query() query: RunHistoryQueryDto,
  ): Promise<AdminRunHistoryPage<CommandView>> {
    return this.admin.commandsPage(id, query);
  }

  @Get('runs/:id/changes')
  @ApiOperation({
    summary: 'Whether the run changed since a token (from the detail or the previous answer): one cheap read',
  })
  @ApiOkResponse({ description: '`{ changed, token, status, lastEventId }`' })
  @ApiBadRequestResponse({ description: 'A bad id or since: `errors` names each field' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  changes(
    @Param('id', runIdPipe()) id: string,
    @Query() query: RunChangesQueryDto,
  ): Promise<AdminRunChanges> {
    return this.admin.changes(id, query.since);
  }

  @Sse('runs/:id/stream')
  @ApiOperation({
    summary:
      "The run's progress stream (ctx.emit) as Server-Sent Events, live, each entry once (id = its seq); " +
      'a reconnect with Last-Event-ID resumes after it; an `end` event once the run has ended',
  })
  @ApiBadRequestResponse({ description: 'A bad id or Last-Event-ID' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  stream(
    @Param('id', runIdPipe()) id: string,
    @Req() req: { socket?: SseSocket },
    @Headers('last-event-id') lastEventId?: string,
  ): Promise<Observable<MessageEvent>> {
    // The socket paces the stream: the next entry only once the previous one was written.
    return this.admin.stream(id, lastEventId, req.socket);
  }
}
