import { installHttpHook } from './http-hook';
import { installUndiciHook } from './undici-hook';

/**
 * Installs the fenced transport (once per process): requests made inside a command or step body
 * leave only while the claim's lease holds, checked where their bytes are handed to the socket.
 * Requests made outside a run's calls are untouched.
 * @internal
 */
export function installFencedTransport(): void {
  installUndiciHook();
  installHttpHook();
}
