import { LoggerService } from '@nestjs/common';

/** Collects the module's log lines (context 'DurableExecution'). */
export class CapturingLogger implements LoggerService {
  readonly lines: Array<{ level: string; message: string }> = [];
  private add(level: string, message: unknown, rest: unknown[]) {
    if (rest[rest.length - 1] === 'DurableExecution') this.lines.push({ level, message: String(message) });
  }
  log(message: unknown, ...rest: unknown[]) {
    this.add('log', message, rest);
  }
  error(message: unknown, ...rest: unknown[]) {
    this.add('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]) {
    this.add('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]) {
    this.add('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]) {
    this.add('verbose', message, rest);
  }
  about(runId: string) {
    return this.lines.filter((l) => l.message.includes(runId));
  }
}
