import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * Model budgets (`budgets` in the module's options, `@DurableStep({ budget })`): `ai_budgets` (one row per
 * budget, as the processes that use it declare it: the lock that serializes its charges), `ai_budget_use`
 * (one row per admitted call: when, and its tokens, the estimate until the call's usage corrects it) and
 * the function `ai_budget_charge`, which admits a call in one round trip: it locks the budget's row,
 * then (a statement of its own, so with a snapshot that sees every charge committed before the lock was
 * granted) counts the calls and sums the tokens of the window and inserts the call when both fit, else
 * returns how long until they will. Rows are kept an hour (or a window, when longer) for the operator,
 * then deleted as it goes.
 */
export class ModelBudgets1765600000000 implements MigrationInterface {
  name = 'ModelBudgets1765600000000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`
      create table ${t.budgets} (
        name        text primary key check (length(name) between 1 and 100),
        requests    int check (requests > 0),
        tokens      bigint check (tokens > 0),
        period_ms   int not null check (period_ms > 0),
        estimate    bigint not null default 0,
        declared_at timestamptz not null default now()
      )`);
    await q.query(`
      create table ${t.budgetUse} (
        id      bigint generated always as identity primary key,
        budget  text not null,
        run_id  uuid,
        step    int,
        at      timestamptz not null,
        tokens  bigint not null default 0
      )`);
    await q.query(`create index ai_budget_use_idx on ${t.budgetUse} (budget, at)`);
    await q.query(`
      create function ${t.prefix}ai_budget_charge(p_name text, p_requests int, p_tokens bigint, p_period_ms int,
                                                  p_estimate bigint, p_run uuid, p_step int)
      returns table (admitted boolean, use_id bigint, wait_ms double precision)
      language plpgsql volatile as $fn$
      declare
        win interval := p_period_ms * interval '1 millisecond';
        est bigint := least(p_estimate, coalesce(p_tokens, p_estimate));
        need bigint := greatest(least(p_estimate, coalesce(p_tokens, p_estimate)), 1);
        c bigint;
        s numeric;
        w_req double precision;
        w_tok double precision;
        v_id bigint;
      begin
        insert into ${t.budgets} (name, requests, tokens, period_ms, estimate)
        values (p_name, p_requests, p_tokens, p_period_ms, p_estimate)
        on conflict (name) do update
          set requests = excluded.requests, tokens = excluded.tokens, period_ms = excluded.period_ms,
              estimate = excluded.estimate, declared_at = now();
        delete from ${t.budgetUse} where ctid = any(array(
          select u.ctid from ${t.budgetUse} u
           where u.budget = p_name and u.at <= clock_timestamp() - greatest(win, interval '1 hour') limit 1000));
        select count(*), coalesce(sum(u.tokens), 0) into c, s
          from ${t.budgetUse} u where u.budget = p_name and u.at > clock_timestamp() - win;
        if (p_requests is null or c + 1 <= p_requests) and (p_tokens is null or s + need <= p_tokens) then
          insert into ${t.budgetUse} (budget, run_id, step, at, tokens)
          values (p_name, p_run, p_step, clock_timestamp(), est)
          returning ${t.budgetUse}.id into v_id;
          return query select true, v_id, 0::double precision;
          return;
        end if;
        if p_requests is not null and c + 1 > p_requests then
          select extract(epoch from (x.at + win - clock_timestamp())) * 1000 into w_req
            from (select u.at from ${t.budgetUse} u
                   where u.budget = p_name and u.at > clock_timestamp() - win
                   order by u.at, u.id offset (c - p_requests) limit 1) x;
        end if;
        if p_tokens is not null and s + need > p_tokens then
          select extract(epoch from (x.at + win - clock_timestamp())) * 1000 into w_tok
            from (select u.at, sum(u.tokens) over (order by u.at, u.id) as cum from ${t.budgetUse} u
                   where u.budget = p_name and u.at > clock_timestamp() - win) x
           where x.cum >= s + need - p_tokens
           order by x.at limit 1;
        end if;
        return query select false, null::bigint, greatest(coalesce(w_req, 0), coalesce(w_tok, 0), 1);
      end
      $fn$`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`drop function ${t.prefix}ai_budget_charge(text, int, bigint, int, bigint, uuid, int)`);
    await q.query(`drop table ${t.budgetUse}`);
    await q.query(`drop table ${t.budgets}`);
  }
}
