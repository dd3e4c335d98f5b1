import { Injectable } from '@nestjs/common';
import {
  DurableStep,
  DurableTransaction,
  DurableTransactionHost,
  DurableWorkflow,
} from 'nestjs-durable-execution';
import type { RunContext } from 'nestjs-durable-execution';

export interface GreetingInput {
  name: string;
}

/** The app's own table, written exactly once per run by a durable transaction (TypeORM 0.3 and 1). */
@Injectable()
export class GreetingLog {
  constructor(private readonly tx: DurableTransactionHost) {}

  @DurableTransaction()
  async record(name: string): Promise<number> {
    await this.tx.manager.query('create table if not exists greeting_log (name text not null)');
    await this.tx.manager.query('insert into greeting_log (name) values ($1)', [name]);
    const rows: Array<{ n: number }> = await this.tx.manager.query(
      'select count(*)::int as n from greeting_log where name = $1',
      [name],
    );
    return rows[0].n;
  }
}

/** Registered in the worker process only: the API process starts runs of 'greeting' without it. */
@DurableWorkflow('greeting')
export class GreetingWorkflow {
  constructor(private readonly log: GreetingLog) {}

  async run(
    input: GreetingInput,
    ctx: RunContext,
  ): Promise<{ greeting: string; ref: string; logged: number }> {
    const greeting = await this.greet(input.name);
    const logged = await this.log.record(`${input.name}:${ctx.runId}`);
    return { greeting, ref: ctx.uuid(), logged };
  }

  @DurableStep({ kind: 'tool' })
  async greet(name: string): Promise<string> {
    return `hello, ${name}`;
  }
}
