import { Body, HttpCode, Inject, Param, Post, Req, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { CommandNotFoundError } from '../../errors/command-not-found.error';
import type { CommandResolution } from '../../interfaces/command.interface';
import { RunRepository } from '../../api/run.repository';
import { AdminAccessGuard, AdminAction, operatorOf } from '../admin-access.guard';
import { AdminErrorFilter } from '../admin-error.filter';
import { AdminRunsService } from '../admin-runs.service';
import { adminValidationPipe } from '../admin-validation.pipe';
import { DURABLE_ADMIN_OPTIONS } from '../admin.constants';
import type { ResolvedAdminOptions } from '../admin-options.interface';
import {
  CancelRunDto,
  CommandDecisionDto,
  ResolveCommandDto,
  RetryHeldDto,
  RetryRunDto,
  SendSignalDto,
} from '../dto/run-actions.dto';
import { ForkRunDto } from '../dto/fork-run.dto';
import { ApiConflictResponse, ApiNotFoundResponse, ApiOperation, ApiTags } from '../../nest/openapi';
import { runIdPipe } from './uuid-param.pipe';

/**
 * Operator actions, each through RunRepository and each recorded in the run's event trail with `by`
 * (who, from the guard). A command key must belong to the run in the URL: another run's key is a 404.
 * Responses show the run and command through the module's `redact` hook, like every admin read.
 */
@ApiTags('durable-admin')
@ApiNotFoundResponse({ description: 'No such run, or no such command on this run' })
@ApiConflictResponse({ description: 'The run or command is not in a state this action applies to' })
@UseGuards(AdminAccessGuard)
@UsePipes(adminValidationPipe())
@UseFilters(AdminErrorFilter)
export class DurableRunActionsController {
  constructor(
    private readonly runs: RunRepository,
    private readonly admin: AdminRunsService,
    @Inject(DURABLE_ADMIN_OPTIONS) private readonly options: ResolvedAdminOptions,
  ) {}

  private by(req: unknown): string {
    return operatorOf(req, this.options);
  }

  @Post('runs/:id/cancel')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Cancel (a running run stops at its next step boundary or heartbeat)' })
  async cancel(@Param('id', runIdPipe()) id: string, @Body() dto: CancelRunDto, @Req() req: unknown) {
    const by = this.by(req);
    return { by, run: this.admin.shown(await this.runs.cancel(id, dto.reason, by)) };
  }

  @Post('runs/retry-held')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Retry the runs of a kind held on non-determinism (after a deploy that replays them)',
  })
  async retryHeld(@Body() dto: RetryHeldDto, @Req() req: unknown) {
    const by = this.by(req);
    return { by, ...(await this.runs.retryHeld(dto.kind, { limit: dto.limit, version: dto.version, by })) };
  }

  @Post('runs/:id/retry')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Retry a dead-lettered or failed run from its last checkpoint' })
  async retry(@Param('id', runIdPipe()) id: string, @Body() _dto: RetryRunDto, @Req() req: unknown) {
    const by = this.by(req);
    return { by, run: this.admin.shown(await this.runs.retry(id, by)) };
  }

  @Post('runs/:id/fork')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Fork: a new run inheriting this one before fromStep, running from there (docs/TIME-TRAVEL.md)',
  })
  async fork(@Param('id', runIdPipe()) id: string, @Body() dto: ForkRunDto, @Req() req: unknown) {
    const by = this.by(req);
    const { run, created, inherited } = await this.runs.fork(id, { ...dto, by });
    return { by, created, inherited, run: this.admin.shown(run) };
  }

  @Post('runs/:id/approve')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Approve a command awaiting approval; the run resumes and dispatches it' })
  approve(@Param('id', runIdPipe()) id: string, @Body() dto: CommandDecisionDto, @Req() req: unknown) {
    return this.decide(id, dto, this.by(req), true);
  }

  @Post('runs/:id/reject')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Reject a command awaiting approval; the workflow sees CommandFailedError' })
  reject(@Param('id', runIdPipe()) id: string, @Body() dto: CommandDecisionDto, @Req() req: unknown) {
    return this.decide(id, dto, this.by(req), false);
  }

  @Post('runs/:id/resolve')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Settle an in-doubt command: succeeded (with result), failed, or retry with the key',
  })
  async resolve(@Param('id', runIdPipe()) id: string, @Body() dto: ResolveCommandDto, @Req() req: unknown) {
    if (!(await this.admin.commandOf(id, dto.key))) throw new CommandNotFoundError(dto.key);
    const resolution = (
      dto.outcome === 'succeeded'
        ? { outcome: 'succeeded', result: dto.result ?? null }
        : dto.outcome === 'failed'
          ? { outcome: 'failed', error: dto.error }
          : { outcome: 'retry' }
    ) as CommandResolution;
    const by = this.by(req);
    await this.runs.resolveCommand(dto.key, resolution, by);
    return { by, command: await this.admin.commandOf(id, dto.key), run: await this.admin.run(id) };
  }

  @Post('runs/:id/signal')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Send a signal (kept for a later ctx.waitForSignal if the run is not waiting yet)',
  })
  async signal(@Param('id', runIdPipe()) id: string, @Body() dto: SendSignalDto, @Req() req: unknown) {
    const by = this.by(req);
    await this.runs.signal(id, dto.name, dto.payload ?? null, by);
    return { by, run: await this.admin.run(id) };
  }

  private async decide(id: string, dto: CommandDecisionDto, by: string, approve: boolean) {
    const decision = { by, note: dto.note };
    if (approve) await this.runs.approve(id, dto.key, decision);
    else await this.runs.reject(id, dto.key, decision);
    return { by, command: await this.admin.commandOf(id, dto.key), run: await this.admin.run(id) };
  }
}
