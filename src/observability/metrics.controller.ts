import { Get, Header } from '@nestjs/common';
import { ApiExcludeController } from '../nest/openapi';
import { DurableMetrics } from './durable-metrics.service';

/** `GET /metrics`: the Prometheus text exposition. Mounted by `DurableObservabilityModule`. */
@ApiExcludeController()
export class DurableMetricsController {
  constructor(private readonly metrics: DurableMetrics) {}

  @Get()
  @Header('Content-Type', 'text/plain; version=0.0.4; charset=utf-8')
  @Header('Cache-Control', 'no-store')
  scrape(): Promise<string> {
    return this.metrics.metrics();
  }
}
