import http from 'node:http';
import type { Socket } from 'node:net';
import type { CallGate } from '../run-storage';
import { currentGate } from './wire-gate';

/**
 * The fenced transport for `node:http` and `node:https` (and what is built on them: axios's http
 * adapter and follow-redirects; got and node-fetch go the same way, untested), whatever agent a request uses:
 *
 * - the live call is captured where the request is made: `Agent.prototype.addRequest` (called
 *   synchronously by the `ClientRequest` constructor), or `onSocket` for a request without an agent;
 * - `ClientRequest.prototype.onSocket` runs for every socket a request gets (a new one, a pooled
 *   keep-alive one). Node emits the request's `'socket'` event and then flushes the buffered request
 *   onto the socket in the same tick. A socket already connected is checked in that event, with no
 *   await before the flush; a connecting one is corked there, and checked when it has connected
 *   (`'connect'`, `'secureConnect'` for TLS), then uncorked, which writes in the same tick. A failed
 *   check destroys the request: not a byte of it leaves.
 * @internal
 */
const GATE = Symbol('durable.wireGate');

type GatedRequest = http.ClientRequest & { [GATE]?: CallGate | null };

function capture(req: GatedRequest): void {
  if (!(GATE in req)) req[GATE] = currentGate() ?? null;
}

function targetOf(req: http.ClientRequest): string {
  return `a request to ${req.method} ${req.protocol}//${req.host}`;
}

function connected(socket: Socket): boolean {
  if (socket.connecting) return false;
  const tls = socket as Socket & { encrypted?: boolean; _secureEstablished?: boolean };
  return !tls.encrypted || !!tls._secureEstablished;
}

/** The check on the request's own socket, before its buffered bytes are flushed to it. */
function guard(req: GatedRequest, gate: CallGate): void {
  req.prependOnceListener('socket', (socket: Socket) => {
    const pass = (): boolean => {
      const refused = gate.check(targetOf(req));
      if (refused) req.destroy(refused);
      return !refused;
    };
    if (connected(socket)) {
      pass(); // the flush follows this event synchronously
      return;
    }
    socket.cork();
    const ready = (socket as Socket & { encrypted?: boolean }).encrypted ? 'secureConnect' : 'connect';
    socket.once(ready, () => {
      if (pass()) socket.uncork();
    });
  });
}

let installed = false;

/** Patches once per process; inert for requests made outside a gated call. */
export function installHttpHook(): void {
  if (installed) return;
  installed = true;
  type AddRequest = (this: http.Agent, req: unknown, ...rest: unknown[]) => unknown;
  const agentProto = http.Agent.prototype as unknown as { addRequest: AddRequest };
  const addRequest = agentProto.addRequest;
  agentProto.addRequest = function (this: http.Agent, req: unknown, ...rest: unknown[]) {
    capture(req as GatedRequest);
    return addRequest.call(this, req, ...rest);
  };
  const proto = http.ClientRequest.prototype as unknown as {
    onSocket(this: GatedRequest, socket: Socket, err?: Error): void;
  };
  const onSocket = proto.onSocket;
  proto.onSocket = function (this: GatedRequest, socket: Socket, err?: Error) {
    capture(this);
    const gate = this[GATE];
    if (gate && socket && !err) guard(this, gate);
    return onSocket.call(this, socket, err);
  };
}
