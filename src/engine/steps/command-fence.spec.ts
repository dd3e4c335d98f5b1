import { FenceVerifier } from '../../util/fence-verifier';
import { fenceSecretKey } from '../../util/fence-signature';
import { formatFence, parseFence } from '../../util/fence-token';
import { commandFence } from './command-fence';
import type { StepEnv } from './step-env';

const SECRET = 'c'.repeat(32);
const KEY = 'run_r1:step_4:transfer';
let ends = new Date(Date.now() + 25_000);
const envWith = (fence?: { keyId: string; secret: string }) =>
  ({
    fence: { runId: 'r1', epoch: 3, timeline: 2 },
    lease: { expiresAt: () => ends },
    options: { fence: fence && { keyId: fence.keyId, key: fenceSecretKey(fence.secret) } },
  }) as unknown as StepEnv;

/** Issue 46 part 1: the engine signs where a command's fence is built (module option `fence`). */
describe('commandFence', () => {
  it('without the option: the claim, the lease end and the command, unsigned (a v1 header)', () => {
    const fence = commandFence(envWith(), KEY);
    expect(fence).toEqual({ runId: 'r1', epoch: 3, timeline: 2, leaseExpiresAt: ends, commandKey: KEY });
    expect(formatFence(fence)).toBe('run=r1;timeline=2;epoch=3');
  });

  it('with it: signed over the claim, the command and the lease end, which a verifier with the key accepts', () => {
    const fence = commandFence(envWith({ keyId: 'k1', secret: SECRET }), KEY);
    expect(fence.signature).toMatchObject({ keyId: 'k1', expiresAtMs: ends.getTime() });
    const token = parseFence(formatFence(fence));
    const verifier = new FenceVerifier({ keys: { k1: SECRET } });
    expect(verifier.authenticate(token, { commandKey: KEY })).toEqual(token);
    expect(() => verifier.authenticate(token, { commandKey: 'run_r1:step_5:transfer' })).toThrow(
      /another command/,
    );
    expect(() => new FenceVerifier({ keys: { k1: 'd'.repeat(32) } }).authenticate(token)).toThrow(
      /MAC does not/,
    );
  });

  it('signs the lease end as of each use: a request sent after a renewal carries the later expiry', () => {
    const fence = commandFence(envWith({ keyId: 'k1', secret: SECRET }), KEY);
    const first = formatFence(fence);
    ends = new Date(ends.getTime() + 10_000); // a heartbeat renewed the lease meanwhile
    expect(fence.leaseExpiresAt).toEqual(ends);
    expect(fence.signature!.expiresAtMs).toBe(ends.getTime());
    expect(formatFence(fence)).not.toBe(first);
    const copy = { ...fence };
    expect(copy).toEqual({
      runId: 'r1',
      epoch: 3,
      timeline: 2,
      commandKey: KEY,
      leaseExpiresAt: ends,
      signature: copy.signature,
    });
    const verifier = new FenceVerifier({ keys: { k1: SECRET } });
    const token = verifier.authenticate(parseFence(formatFence(fence)), { commandKey: KEY });
    expect(token.signature!.expiresAtMs).toBe(ends.getTime());
  });
});
