import { Get, Inject, Res, UseGuards } from '@nestjs/common';
import type { HealthCheckService } from '@nestjs/terminus';
import { setAdminResponseHeaders } from '../nest/response-headers';
import { ApiOperation, ApiTags } from '../nest/openapi';
import { DurableHealthIndicator } from './durable-health.indicator';
import { DURABLE_HEALTH_CHECK_SERVICE } from './observability.constants';
import { HealthAccessGuard } from './route-access.guard';

/**
 * `GET <path>/health`: terminus's report of the database, the worker loop, the backlog and the replication mode; 200 when all
 * are up, 503 with the details when one is down. Open unless `health.guard` is set: without
 * `health.detailed` the details hold no database error text and no worker id.
 */
@ApiTags('durable-admin')
@UseGuards(HealthAccessGuard)
export class DurableHealthController {
  constructor(
    @Inject(DURABLE_HEALTH_CHECK_SERVICE) private readonly health: HealthCheckService,
    private readonly indicator: DurableHealthIndicator,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'Database reachable, worker loop alive, backlog age under its bound, replication mode',
  })
  check(@Res({ passthrough: true }) res: unknown) {
    setAdminResponseHeaders(res); // no-store, nosniff: on the 503 too
    return this.health.check([
      () => this.indicator.database(),
      () => this.indicator.worker(),
      () => this.indicator.backlog(),
      () => this.indicator.replication(),
    ]);
  }
}
