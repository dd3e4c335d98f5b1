import 'reflect-metadata';
import { ExecutionContext, Logger } from '@nestjs/common';
import { UnauthenticatedFenceError } from '../errors/unauthenticated-fence.error';
import { signFence } from '../util/fence-signature';
import { FenceToken, formatFence } from '../util/fence-token';
import { FenceVerifier } from '../util/fence-verifier';
import { DURABLE_HTTP_STATUS } from './durable-exception.filter';
import { DurableFenceGuard, DurableFenceKey } from './durable-fence.guard';

const SECRET = 'g'.repeat(32);
const KEY = 'run_r1:step_0:transfer';
const signed = (commandKey = KEY) =>
  signFence(
    { runId: 'r1', timeline: 1, epoch: 2 },
    { keyId: 'k1', secret: SECRET, commandKey, expiresAt: Date.now() + 20_000 },
  );

class Transfers {
  @DurableFenceKey((req: { body: { idempotencyKey: string } }) => req.body.idempotencyKey)
  create() {}
  plain() {}
}
@DurableFenceKey((req: { params: { key: string } }) => req.params.key)
class Lookups {
  lookup() {}
}

/** The context of a request to `handler` of `cls` carrying `token`. */
function contextOf(
  token: FenceToken | undefined,
  cls: new () => object,
  handler: string,
  request: object = {},
) {
  const req = { headers: token ? { 'durable-fence': formatFence(token) } : {}, ...request };
  return {
    switchToHttp: () => ({ getRequest: () => req }),
    getHandler: () => (cls.prototype as Record<string, unknown>)[handler],
    getClass: () => cls,
  } as unknown as ExecutionContext;
}

/** Issue 46 part 1: the guard, given the module's FenceVerifier with keys, refuses what is not authentic. */
describe('DurableFenceGuard with a FenceVerifier that has keys', () => {
  const guard = new DurableFenceGuard(new FenceVerifier({ keys: { k1: SECRET } }));
  const body = { body: { idempotencyKey: KEY } };

  it('admits a signed token for the command the request serves', () => {
    expect(guard.canActivate(contextOf(signed(), Transfers, 'create', body))).toBe(true);
    expect(guard.canActivate(contextOf(signed(), Lookups, 'lookup', { params: { key: KEY } }))).toBe(true);
  });

  it.each<[string, () => ExecutionContext, string]>([
    [
      'an unsigned token',
      () => contextOf({ runId: 'r1', timeline: 1, epoch: 1000 }, Transfers, 'create', body),
      'unsigned',
    ],
    ['a raised epoch', () => contextOf({ ...signed(), epoch: 1000 }, Transfers, 'create', body), 'forged'],
    [
      'an expired token',
      () =>
        contextOf(
          signFence(signed(), { keyId: 'k1', secret: SECRET, commandKey: KEY, expiresAt: 1 }),
          Transfers,
          'plain',
        ),
      'expired',
    ],
    [
      'another command’s token (@DurableFenceKey on the method)',
      () => contextOf(signed('run_r3:step_0:x'), Transfers, 'create', body),
      'other-command',
    ],
    [
      'another command’s token (@DurableFenceKey on the class)',
      () => contextOf(signed(), Lookups, 'lookup', { params: { key: 'k-other' } }),
      'other-command',
    ],
  ])('refuses %s before the handler (401)', (_label, context, reason) => {
    expect(() => guard.canActivate(context())).toThrow(UnauthenticatedFenceError);
    try {
      guard.canActivate(context());
    } catch (e) {
      expect(e).toMatchObject({ code: 'DURABLE_UNAUTHENTICATED_FENCE', reason });
    }
    expect(DURABLE_HTTP_STATUS.DURABLE_UNAUTHENTICATED_FENCE).toBe(401);
  });

  it('without @DurableFenceKey it authenticates the token, and leaves the command to check()', () => {
    expect(guard.canActivate(contextOf(signed('any-key'), Transfers, 'plain'))).toBe(true);
  });
});

describe('DurableFenceGuard without a FenceVerifier', () => {
  it('checks the format only, and says so once in the log', () => {
    jest.isolateModules(() => {
      /* eslint-disable @typescript-eslint/no-require-imports */
      const { Logger: FreshLogger } = require('@nestjs/common') as { Logger: typeof Logger };
      const { DurableFenceGuard: Fresh } =
        require('./durable-fence.guard') as typeof import('./durable-fence.guard');
      /* eslint-enable @typescript-eslint/no-require-imports */
      const warn = jest.spyOn(FreshLogger.prototype, 'warn').mockImplementation(() => undefined);
      const guard = new Fresh();
      new Fresh();
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn.mock.calls[0][0]).toMatch(
        /DurableFenceGuard finds no FenceVerifier provider .* NOT authenticated/,
      );
      expect(
        guard.canActivate(contextOf({ runId: 'r1', timeline: 1, epoch: 1000 }, Transfers, 'create')),
      ).toBe(true);
      warn.mockRestore();
    });
  });
});
