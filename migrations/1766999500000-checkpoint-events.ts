import { MigrationInterface, QueryRunner } from 'typeorm';
import { durableNames } from '../src/store/durable-names';

/**
 * A step's `run.checkpoint_saved` event is written in its checkpoint row (issue 47 part 1): a step commit
 * writes the run's row and its checkpoint, no event row beside it (one heap tuple, three index entries
 * and a foreign-key check fewer, 42 % of its WAL). `ai_checkpoints.event_id` takes its id from the
 * events' own identity sequence (the trail keeps one order), `event` its payload as the event row had it;
 * both null in a checkpoint written without an event (values, commands, waits) or by a worker of an
 * earlier release, which writes the event row instead: a reader unions the two (`EVENT_TRAIL`), with no
 * row twice in a mixed fleet. `ai_rewound_checkpoints` gets the same columns (a rewind keeps the events of
 * what it took out). Nullable columns without a default: a catalog change. The roles that may insert
 * events get USAGE on the sequence (a step commit calls nextval). Numbered before the events
 * partitioning, which stays the newest migration (its test and bench/history revert it alone).
 */
export class CheckpointEvents1766999500000 implements MigrationInterface {
  name = 'CheckpointEvents1766999500000';
  /** The PostgreSQL schema of the tables (see `durableExecutionMigrations`); unset: unqualified names. */
  schema?: string;

  public async up(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.checkpoints} add column event_id bigint, add column event jsonb`);
    // A step commit now draws ids from the sequence itself (nextval needs USAGE; an identity column's
    // default needed none): every role that may insert events may draw them.
    const grantees: { grantee: string }[] = await q.query(
      `select distinct case when a.grantee = 0 then 'public' else quote_ident(r.rolname) end as grantee
         from pg_class c, aclexplode(c.relacl) a left join pg_roles r on r.oid = a.grantee
        where c.oid = '${t.events}'::regclass and a.privilege_type = 'INSERT' and a.grantee <> c.relowner`,
    );
    for (const { grantee } of grantees) await q.query(`grant usage on sequence ${t.eventIds} to ${grantee}`);
    await q.query(`alter table ${t.rewound} add column event_id bigint, add column event jsonb`);
  }

  public async down(q: QueryRunner): Promise<void> {
    const t = durableNames(this.schema);
    await q.query(`alter table ${t.rewound} drop column event, drop column event_id`);
    await q.query(`alter table ${t.checkpoints} drop column event, drop column event_id`);
  }
}
