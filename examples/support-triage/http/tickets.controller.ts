import {
  Body,
  Controller,
  Get,
  HttpStatus,
  NotFoundException,
  Param,
  ParseUUIDPipe,
  Post,
  Res,
} from '@nestjs/common';
import { CommandGateway, RunRepository } from '../../../src'; // in an app: 'nestjs-durable-execution'
import { SupportTriageWorkflow, type TriageResult } from '../triage.workflow';
import { CreateTicketDto } from './create-ticket.dto';

@Controller('tickets')
export class TicketsController {
  constructor(
    private readonly runs: RunRepository,
    private readonly commands: CommandGateway,
  ) {}

  /** Starts the agent's run, once per ticket id: a repeated POST returns the same run. */
  @Post()
  async create(
    @Body() dto: CreateTicketDto,
    @Res({ passthrough: true }) res: { status(code: number): unknown },
  ) {
    const ticket = { ticketId: dto.ticketId, from: dto.from, text: dto.text };
    const { run, created } = await this.runs.start(SupportTriageWorkflow, ticket, {
      idempotencyKey: dto.ticketId,
    });
    res.status(created ? HttpStatus.CREATED : HttpStatus.OK);
    return { id: run.id, ticketId: dto.ticketId, status: run.status, created };
  }

  /** The run's status, the agent's answer once it finished, its recorded steps, commands and events. */
  @Get(':id')
  async get(@Param('id', new ParseUUIDPipe()) id: string) {
    const run = await this.runs.get(id);
    if (!run || run.kind !== 'support-triage') throw new NotFoundException(`no ticket run ${id}`);
    const [checkpoints, commands, events] = await Promise.all([
      this.runs.checkpoints(id),
      this.commands.listForRun(id),
      this.runs.events(id, { newestFirst: true, limit: 100 }).then((newest) => newest.reverse()),
    ]);
    const output = run.output as TriageResult | null;
    return {
      id: run.id,
      ticketId: run.idempotencyKey,
      status: run.status,
      epoch: run.epoch,
      workerId: run.workerId,
      answer: output?.answer ?? null,
      output,
      error: run.error,
      steps: checkpoints.map((c) => ({ step: c.stepIndex, name: c.stepName, epoch: c.epoch })),
      commands: commands.map((c) => ({
        name: c.name,
        idempotencyKey: c.idempotencyKey,
        status: c.status,
        result: c.result,
      })),
      events: events.map((e) => ({ type: e.type, epoch: e.epoch, at: e.createdAt })),
    };
  }
}
