import type { CommandFence } from '../../interfaces/command.interface';
import { fenceSignature } from '../../util/fence-signature';
import type { StepEnv } from './step-env';

/**
 * The fencing token a command's call (`ctx.fence`) or its lookup (`context.fence`) carries: the claim's
 * (timeline, epoch), the lease's end by this process's clock, the command's key and, with the module
 * option `fence`, the MAC over all of them (`FenceVerifier` checks it). Built at each send: a retry's
 * token expires at the lease's end as of that retry.
 */
export function commandFence(env: StepEnv, commandKey: string): CommandFence {
  const { runId, epoch, timeline = 1 } = env.fence;
  const leaseExpiresAt = env.lease.expiresAt();
  const fence: CommandFence = { runId, epoch, timeline, leaseExpiresAt, commandKey };
  const signing = env.options.fence;
  if (signing)
    fence.signature = fenceSignature(
      signing.key,
      signing.keyId,
      { runId, timeline, epoch },
      commandKey,
      leaseExpiresAt.getTime(),
    );
  return fence;
}
