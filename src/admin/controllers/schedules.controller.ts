import {
  Body,
  Delete,
  Get,
  HttpCode,
  Param,
  Post,
  Req,
  UseFilters,
  UseGuards,
  UsePipes,
} from '@nestjs/common';
import { DurableSchedules, ScheduleView } from '../../api/durable-schedules.service';
import { AdminAccessGuard, AdminAction } from '../admin-access.guard';
import { AdminErrorFilter } from '../admin-error.filter';
import { ApiConflictResponse, ApiNotFoundResponse, ApiOperation, ApiTags } from '../../nest/openapi';
import { adminValidationPipe } from '../admin-validation.pipe';
import { CreateScheduleDto } from '../dto/schedule.dto';

/**
 * The `@DurableCron` schedules: `GET <path>/api/schedules` (with their next and last ticks),
 * `POST <path>/api/schedules/:name/pause` and `/resume`; schedules made at run time: `POST
 * <path>/api/schedules` and `DELETE <path>/api/schedules/:name`. Mounted by DurableAdminModule.
 */
@ApiTags('durable-admin')
@ApiNotFoundResponse({ description: 'No schedule has this name' })
@UseGuards(AdminAccessGuard)
@UseFilters(AdminErrorFilter)
@UsePipes(adminValidationPipe())
export class DurableSchedulesController {
  constructor(private readonly schedules: DurableSchedules) {}

  @Get('schedules')
  @ApiOperation({ summary: 'The @DurableCron schedules, by name, with their next and last ticks' })
  list(): Promise<ScheduleView[]> {
    return this.schedules.list();
  }

  @Post('schedules')
  @AdminAction()
  @HttpCode(201)
  @ApiOperation({ summary: 'Create a schedule at run time (fired like a @DurableCron one)' })
  @ApiConflictResponse({ description: 'A schedule has this name (send replace: true to replace it)' })
  create(@Body() dto: CreateScheduleDto, @Req() _req: unknown): Promise<ScheduleView> {
    const { name, kind, cron, ...options } = dto;
    return this.schedules.create(name, kind, cron, options);
  }

  @Delete('schedules/:name')
  @AdminAction()
  @HttpCode(204)
  @ApiOperation({ summary: 'Remove a schedule made at run time (a @DurableCron one: pause it instead)' })
  async remove(@Param('name') name: string, @Req() _req: unknown): Promise<void> {
    await this.schedules.remove(name);
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
