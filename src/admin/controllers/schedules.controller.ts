import { Get, HttpCode, Param, Post, Req, UseFilters, UseGuards } from '@nestjs/common';
import { DurableSchedules, ScheduleView } from '../../api/durable-schedules.service';
import { AdminAccessGuard, AdminAction } from '../admin-access.guard';
import { AdminErrorFilter } from '../admin-error.filter';
import { ApiNotFoundResponse, ApiOperation, ApiTags } from '../../nest/openapi';

/**
 * The `@DurableCron` schedules: `GET <path>/api/schedules` (with their next and last ticks),
 * `POST <path>/api/schedules/:name/pause` and `/resume`. Mounted by DurableAdminModule.
 */
@ApiTags('durable-admin')
@ApiNotFoundResponse({ description: 'No schedule has this name' })
@UseGuards(AdminAccessGuard)
@UseFilters(AdminErrorFilter)
export class DurableSchedulesController {
  constructor(private readonly schedules: DurableSchedules) {}

  @Get('schedules')
  @ApiOperation({ summary: 'The @DurableCron schedules, by name, with their next and last ticks' })
  list(): Promise<ScheduleView[]> {
    return this.schedules.list();
  }

  @Post('schedules/:name/pause')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Pause a schedule: its ticks start nothing until it is resumed' })
  pause(@Param('name') name: string, @Req() _req: unknown): Promise<ScheduleView> {
    return this.schedules.pause(name);
  }

  @Post('schedules/:name/resume')
  @AdminAction()
  @HttpCode(200)
  @ApiOperation({ summary: 'Resume a schedule from its next tick after now' })
  resume(@Param('name') name: string, @Req() _req: unknown): Promise<ScheduleView> {
    return this.schedules.resume(name);
  }
}
