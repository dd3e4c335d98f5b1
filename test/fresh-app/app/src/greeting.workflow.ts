import { DurableStep, DurableWorkflow } from 'nestjs-durable-execution';
import type { RunContext } from 'nestjs-durable-execution';

export interface GreetingInput {
  name: string;
}

/** Registered in the worker process only: the API process starts runs of 'greeting' without it. */
@DurableWorkflow('greeting')
export class GreetingWorkflow {
  async run(input: GreetingInput, ctx: RunContext): Promise<{ greeting: string; ref: string }> {
    const greeting = await this.greet(input.name);
    return { greeting, ref: ctx.uuid() };
  }

  @DurableStep({ kind: 'tool' })
  async greet(name: string): Promise<string> {
    return `hello, ${name}`;
  }
}
