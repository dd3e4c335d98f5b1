import { installPgWireHook } from '../../store/pg-wire-hook';
import { runStorage, type RunFrame } from '../run-storage';
import { installHttpHook } from './http-hook';
import { installHttp2Hook } from './http2-hook';
import { installSocketHook } from './socket-hook';
import { installUndiciHook } from './undici-hook';
import { currentGate } from './wire-gate';

/**
 * Installs the fenced transport (once per process): what a command or step body sends leaves only
 * while the claim's lease holds, checked where its bytes are handed to the socket: HTTP requests
 * (undici, `node:http`), http2 requests, pg queries, and any other write on a `net`/`tls` socket.
 * What is sent outside a run's calls is untouched.
 * @internal
 */
export function installFencedTransport(): void {
  installUndiciHook();
  installHttpHook();
  installHttp2Hook();
  installPgWireHook({
    currentGate,
    // run(undefined), not exit(): exit disables the storage (and, when it is the process's only one,
    // Node's async hooks) and enables it again, on every statement the engine sends.
    exit: (fn) => runStorage.run(undefined as unknown as RunFrame, fn),
    capture: () => {
      const frame = runStorage.getStore();
      return (fn) => runStorage.run(frame as RunFrame, fn);
    },
  });
  installSocketHook();
}
