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
import { CreateOrderDto } from './create-order.dto';

@Controller('orders')
export class OrdersController {
  constructor(
    private readonly runs: RunRepository,
    private readonly commands: CommandGateway,
  ) {}

  /** Starts the purchase-order run, once per order reference: a repeated POST returns the same run. */
  @Post()
  async create(
    @Body() dto: CreateOrderDto,
    @Res({ passthrough: true }) res: { status(code: number): unknown },
  ) {
    const { run, created } = await this.runs.start('purchase-order', dto, { idempotencyKey: dto.orderRef });
    res.status(created ? HttpStatus.CREATED : HttpStatus.OK);
    return { id: run.id, orderRef: dto.orderRef, status: run.status, created };
  }

  /** The run with its checkpoints, its external commands and the newest 200 events of its trail, oldest first. */
  @Get(':id')
  async get(@Param('id', new ParseUUIDPipe()) id: string) {
    const run = await this.runs.get(id);
    if (!run) throw new NotFoundException(`no purchase-order run ${id}`);
    const [checkpoints, commands, events] = await Promise.all([
      this.runs.checkpoints(id),
      this.commands.listForRun(id),
      this.runs.events(id, { newestFirst: true, limit: 200 }).then((newest) => newest.reverse()),
    ]);
    return {
      id: run.id,
      orderRef: run.idempotencyKey,
      status: run.status,
      cursor: run.cursor,
      epoch: run.epoch,
      output: run.output,
      error: run.error,
      createdAt: run.createdAt,
      finishedAt: run.finishedAt,
      checkpoints: checkpoints.map((c) => ({
        step: c.stepIndex,
        name: c.stepName,
        epoch: c.epoch,
        meta: c.meta,
        output: c.output,
      })),
      commands: commands.map((c) => ({
        name: c.name,
        idempotencyKey: c.idempotencyKey,
        status: c.status,
        result: c.result,
        error: c.error,
      })),
      events: events.map((e) => ({ type: e.type, epoch: e.epoch, at: e.createdAt, payload: e.payload })),
    };
  }
}
