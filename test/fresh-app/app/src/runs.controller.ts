import { Body, Controller, Get, Param, Post } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { CheckpointService, CommandGateway, LeaseService, RunRepository } from 'nestjs-durable-execution';
import { GreetingWorkflow } from './greeting.workflow';
import { TicksService } from './ticks.service';

@Controller()
export class RunsController {
  constructor(
    private readonly runs: RunRepository,
    private readonly checkpoints: CheckpointService,
    private readonly commands: CommandGateway,
    private readonly leases: LeaseService,
    private readonly ticks: TicksService,
    private readonly dataSource: DataSource,
  ) {}

  /**
   * Starts a 'greeting' run, typed by the workflow class (input and output from its `run()`). This
   * process imports the class for its type and kind only: it does not register it (worker disabled).
   */
  @Post('greetings')
  async start(@Body() body: { name: string }): Promise<{ id: string; status: string }> {
    const { run } = await this.runs.start(GreetingWorkflow, { name: body.name });
    const typed: { greeting: string; ref: string } | null = run.output; // the class's output type
    return { id: run.id, status: typed === null ? run.status : 'unexpected' };
  }

  /** The card's four services, injected into the app's own controller, each asked about one run. */
  @Get('runs/:id/overview')
  async overview(@Param('id') id: string) {
    const run = await this.runs.get(id);
    return {
      status: run?.status ?? null,
      checkpoints: (await this.checkpoints.list(id)).length,
      commands: (await this.commands.listForRun(id)).length,
      holder: await this.leases.holder(id),
    };
  }

  @Get('ticks')
  async countTicks(): Promise<{ ticks: number }> {
    return { ticks: await this.ticks.over(1000) };
  }

  /** Provokes one library error by its code; DurableExceptionFilter (global, main.ts) answers it. */
  @Post('errors/:code')
  async provoke(@Param('code') code: string): Promise<never> {
    const start = (name: string, idempotencyKey?: string) =>
      this.runs.start(GreetingWorkflow, { name }, idempotencyKey ? { idempotencyKey } : {});
    switch (code) {
      case 'DURABLE_RUN_NOT_FOUND':
        await this.runs.cancel(randomUUID());
        break;
      case 'DURABLE_INVALID_ARGUMENT':
        await this.runs.cancel('not-a-uuid');
        break;
      case 'DURABLE_INVALID_RUN_STATE': {
        const { run } = await start('cancelled twice');
        await this.runs.cancel(run.id);
        await this.runs.cancel(run.id);
        break;
      }
      case 'DURABLE_IDEMPOTENCY_CONFLICT': {
        const key = randomUUID();
        await start('first', key);
        await start('second', key);
        break;
      }
      case 'DURABLE_NOT_SERIALIZABLE':
        await start('nul \u0000 byte');
        break;
      case 'DURABLE_PAYLOAD_TOO_LARGE':
        await start('x'.repeat((1 << 20) + 1));
        break;
      case 'DURABLE_COMMAND_NOT_FOUND': {
        const { run } = await start('no such command');
        await this.runs.approve(run.id, 'no-such-key', { by: 'fresh-app' });
        break;
      }
      case 'DURABLE_INVALID_COMMAND_STATE': {
        // A command that already succeeded (written by hand: this process runs no workflow) cannot be approved.
        const { run } = await start('settled command');
        const key = `run_${run.id}:step_0:pay`;
        await this.dataSource.query(
          `insert into ai_commands (idempotency_key, run_id, step_index, command_name, payload, status, epoch)
           values ($1, $2, 0, 'pay', '{}'::jsonb, 'succeeded', 1)`,
          [key, run.id],
        );
        await this.runs.approve(run.id, key, { by: 'fresh-app' });
        break;
      }
    }
    throw new Error(`no library error was raised for ${code}`);
  }
}
