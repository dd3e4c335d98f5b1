import { Body, Controller, Get, Post } from '@nestjs/common';
import { RunRepository } from 'nestjs-durable-execution';
import { TicksService } from './ticks.service';

@Controller()
export class RunsController {
  constructor(
    private readonly runs: RunRepository,
    private readonly ticks: TicksService,
  ) {}

  /** Starts a 'greeting' run; this process does not register the workflow (worker disabled). */
  @Post('greetings')
  async start(@Body() body: { name: string }): Promise<{ id: string; status: string }> {
    const { run } = await this.runs.start('greeting', { name: body.name });
    return { id: run.id, status: run.status };
  }

  @Get('ticks')
  async countTicks(): Promise<{ ticks: number }> {
    return { ticks: await this.ticks.over(1000) };
  }
}
