import { Get, Header, UseGuards } from '@nestjs/common';
import { ApiExcludeController } from '../nest/openapi';
import { DurableMetrics } from './durable-metrics.service';
import { MetricsAccessGuard } from './route-access.guard';

/**
 * `GET /metrics`: the Prometheus text exposition. Mounted by `DurableObservabilityModule`; open unless
 * `metrics.guard` is set.
 */
@ApiExcludeController()
@UseGuards(MetricsAccessGuard)
export class DurableMetricsController {
  constructor(private readonly metrics: DurableMetrics) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  @Header('Cache-Control', 'no-store')
  scrape(): Promise<string> {
    return this.metrics.metrics();
  }
}
