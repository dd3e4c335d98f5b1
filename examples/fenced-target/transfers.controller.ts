import {
  BadRequestException,
  Body,
  Controller,
  Get,
  HttpCode,
  Param,
  Post,
  UseFilters,
  UseGuards,
} from '@nestjs/common';
import { DataSource } from 'typeorm';
import type { LookupResult } from '../../src'; // in an app: 'nestjs-durable-execution' (a type: loads nothing)
import {
  DurableExceptionFilter,
  DurableFenceGuard,
  DurableFenceKey,
  DurableFenceToken,
  FenceToken,
  FenceVerifier,
} from '../../src/fence'; // in an app: 'nestjs-durable-execution/fence'

/** What POST /transfers takes: the command's idempotency key and the transfer. */
export interface TransferBody {
  idempotencyKey: string;
  account: string;
  amountCents: number;
}

/** What the service answers for an applied transfer (and a lookup that finds one). */
export interface Transfer {
  transferId: number;
  idempotencyKey: string;
  account: string;
  amountCents: number;
}

function transferBody(body: unknown): TransferBody {
  const b = (body ?? {}) as Partial<TransferBody>;
  if (typeof b.idempotencyKey !== 'string' || !b.idempotencyKey || b.idempotencyKey.length > 512)
    throw new BadRequestException('idempotencyKey must be a string of 1-512 characters');
  if (typeof b.account !== 'string' || !b.account) throw new BadRequestException('account must be a string');
  if (!Number.isSafeInteger(b.amountCents) || b.amountCents! <= 0)
    throw new BadRequestException('amountCents must be a positive integer');
  return { idempotencyKey: b.idempotencyKey, account: b.account, amountCents: b.amountCents! };
}

const toTransfer = (r: Record<string, unknown>): Transfer => ({
  transferId: Number(r.id),
  idempotencyKey: String(r.idempotency_key),
  account: String(r.account),
  amountCents: Number(r.amount_cents),
});

/** The idempotency key a request serves, as a string (else undefined: the body check answers 400). */
const bodyKey = (req: { body?: { idempotencyKey?: unknown } }) =>
  typeof req.body?.idempotencyKey === 'string' ? req.body.idempotencyKey : undefined;

/**
 * An internal transfer service that a durable workflow's command calls. Both endpoints need the
 * `durable-fence` header (`DurableFenceGuard`: 400 without it). With keys (module `FencedTargetModule`),
 * the guard refuses a token that is unsigned, forged, expired or another command's with 401
 * `DURABLE_UNAUTHENTICATED_FENCE` before the handler runs, and the handler's `check` again (it is the
 * check that counts). Both check the token in the transaction of what they do: a request from a
 * superseded claim is refused with 409 `DURABLE_STALE_FENCE` and its transaction rolled back. It
 * records every transfer it applies (it does not deduplicate keys), so the fence alone keeps a zombie
 * from applying one again. A real service authenticates its callers too (mTLS, a service token): a
 * fencing token orders a run's claims, it does not say who may call.
 */
@Controller('transfers')
@UseGuards(DurableFenceGuard)
@UseFilters(DurableExceptionFilter)
export class TransfersController {
  constructor(
    private readonly dataSource: DataSource,
    private readonly verifier: FenceVerifier,
  ) {}

  @Post()
  @DurableFenceKey(bodyKey)
  async create(@Body() body: unknown, @DurableFenceToken() fence: FenceToken): Promise<Transfer> {
    const t = transferBody(body);
    return this.dataSource.transaction(async (manager) => {
      // Before the write, in its transaction; the token must be for the command whose key it carries.
      await this.verifier.check(manager.query.bind(manager), fence, { commandKey: t.idempotencyKey });
      const [row] = await manager.query(
        `insert into transfers (idempotency_key, account, amount_cents, run_id, timeline, epoch)
         values ($1, $2, $3, $4, $5, $6) returning *`,
        [t.idempotencyKey, t.account, t.amountCents, fence.runId, fence.timeline, fence.epoch],
      );
      return toTransfer(row);
    });
  }

  /** The lookup a workflow's `lookupCommand` asks. It raises the fence too: see README.md. */
  @Get(':key')
  @HttpCode(200)
  @DurableFenceKey((req: { params: { key: string } }) => req.params.key)
  async lookup(@Param('key') key: string, @DurableFenceToken() fence: FenceToken): Promise<LookupResult> {
    return this.dataSource.transaction(async (manager) => {
      await this.verifier.check(manager.query.bind(manager), fence, { commandKey: key });
      const rows = await manager.query(
        `select * from transfers where idempotency_key = $1 order by id limit 1`,
        [key],
      );
      return rows.length ? { found: true, result: toTransfer(rows[0]) } : { found: false };
    });
  }
}
