import { Get, Param, Query, UseFilters, UseGuards, UsePipes } from '@nestjs/common';
import { AdminAccessGuard } from '../admin-access.guard';
import { AdminErrorFilter } from '../admin-error.filter';
import { AdminRunDetail, AdminRunPage, AdminRunsService } from '../admin-runs.service';
import { adminValidationPipe } from '../admin-validation.pipe';
import { ListRunsQueryDto } from '../dto/list-runs-query.dto';
import {
  ApiBadRequestResponse,
  ApiForbiddenResponse,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
  ApiUnauthorizedResponse,
} from '../../nest/openapi';
import { runIdPipe } from './uuid-param.pipe';

/** Reads: `GET <path>/api/runs`, `GET <path>/api/stats`, `GET <path>/api/runs/:id`. Mounted by DurableAdminModule. */
@ApiTags('durable-admin')
@ApiUnauthorizedResponse({ description: 'The guard wants credentials' })
@ApiForbiddenResponse({ description: 'The guard refused' })
@UseGuards(AdminAccessGuard)
@UsePipes(adminValidationPipe())
@UseFilters(AdminErrorFilter)
export class DurableRunsApiController {
  constructor(private readonly admin: AdminRunsService) {}

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

  @Get('runs/:id')
  @ApiOperation({ summary: 'One run with its cursor, checkpoints, commands, events and timeline' })
  @ApiOkResponse({ description: 'The run and its record' })
  @ApiNotFoundResponse({ description: 'No run with this id' })
  get(@Param('id', runIdPipe()) id: string): Promise<AdminRunDetail> {
    return this.admin.detail(id);
  }
}
