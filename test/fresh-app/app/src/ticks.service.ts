import { Injectable } from '@nestjs/common';
import { Interval } from '@nestjs/schedule';

/** The app's own timer: one `@Interval(100)`, registered once by the app's own `ScheduleModule.forRoot()`. */
@Injectable()
export class TicksService {
  count = 0;

  @Interval(100)
  tick(): void {
    this.count++;
  }

  /** Ticks counted over `ms` (expect about ms / 100; twice that if the interval were registered twice). */
  async over(ms: number): Promise<number> {
    const before = this.count;
    await new Promise((resolve) => setTimeout(resolve, ms));
    return this.count - before;
  }
}
