import type { CommandFence } from '../../interfaces/command.interface';
import { fenceSignature } from '../../util/fence-signature';
import type { StepEnv } from './step-env';

/**
 * The fencing token a command's call (`ctx.fence`) or its lookup (`context.fence`) carries: the claim's
 * (timeline, epoch), the command's key, the lease's end by this process's clock and, with the module
 * option `fence`, the MAC over all of them (`FenceVerifier` checks it). The lease's end and the
 * signature are read when they are used: `fenceHeaders(ctx.fence)` at each request signs the lease's end
 * as of that request, which heartbeats move on while the claim holds and nothing moves once it is lost.
 */
export function commandFence(env: StepEnv, commandKey: string): CommandFence {
  const { runId, epoch, timeline = 1 } = env.fence;
  const fence = { runId, epoch, timeline, commandKey } as CommandFence;
  Object.defineProperty(fence, 'leaseExpiresAt', { enumerable: true, get: () => env.lease.expiresAt() });
  const signing = env.options.fence;
  if (signing)
    Object.defineProperty(fence, 'signature', {
      enumerable: true,
      get: () => {
        const pair = { runId, timeline, epoch };
        return fenceSignature(signing.key, signing.keyId, pair, commandKey, env.lease.expiresAt().getTime());
      },
    });
  return fence;
}
