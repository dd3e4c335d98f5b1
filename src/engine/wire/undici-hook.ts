import diagnostics from 'node:diagnostics_channel';
import { exemptFromWireCheck } from '../../util/wire-exempt';
import type { CallGate } from '../run-storage';
import { currentGate } from './wire-gate';

/**
 * The fenced transport for undici: Node's global `fetch`, any dispatcher (the global one, an app's
 * ProxyAgent or custom TLS agent installed before or after the module started, one passed as
 * `fetch(url, { dispatcher })`), and the `undici` package where it publishes the same channels.
 *
 * - `undici:request:create` fires synchronously inside `dispatch()`, in the caller's async context:
 *   the request is tied there to the live call that made it.
 * - undici calls the request's `onConnect(abort)` synchronously right before it writes the request
 *   to its socket (`writeH1`/`writeH2`), and, by undici 6's source, again when it re-sends a queued
 *   request (not tested). The request's own `onConnect` is wrapped: the gate is checked there, and a
 *   failed check calls `abort` (undici then returns without writing a byte).
 * - Where a request has no `onConnect` (another undici major), `undici:client:sendHeaders` (published
 *   right before the write) destroys the socket instead, which a write after it cannot pass.
 * - undici's sockets are left alone by the socket check (`socket-hook.ts`): undici writes a queued
 *   request in whatever context freed its connection. They are marked on `undici:client:connected`
 *   and, for a socket connected before the hook, on `undici:client:sendHeaders`, before the write.
 * @internal
 */
const gated = new WeakMap<object, CallGate>();

interface UndiciRequest {
  origin?: unknown;
  method?: string;
  onConnect?: (abort: (err?: Error) => void) => unknown;
}

function targetOf(request: UndiciRequest): string {
  return `a request to ${request.method ?? 'GET'} ${String(request.origin ?? 'an unknown origin')}`;
}

function onCreate(message: unknown): void {
  const gate = currentGate();
  if (!gate) return;
  const request = (message as { request: UndiciRequest }).request;
  const onConnect = request.onConnect;
  if (typeof onConnect !== 'function') {
    gated.set(request, gate);
    return;
  }
  request.onConnect = function (this: UndiciRequest, abort: (err?: Error) => void) {
    const refused = gate.check(targetOf(request));
    if (refused) return abort(refused);
    return onConnect.call(this, abort);
  };
}

function onConnected(message: unknown): void {
  exemptFromWireCheck((message as { socket?: object }).socket);
}

function onSendHeaders(message: unknown): void {
  const { request, socket } = message as { request: UndiciRequest; socket?: { destroy(e: Error): void } };
  exemptFromWireCheck(socket);
  const refused = gated.get(request)?.check(targetOf(request));
  if (refused) socket?.destroy(refused);
}

let installed = false;

/** Subscribes once per process; inert for requests made outside a gated call. */
export function installUndiciHook(): void {
  if (installed) return;
  installed = true;
  diagnostics.subscribe('undici:request:create', onCreate);
  diagnostics.subscribe('undici:client:sendHeaders', onSendHeaders);
  diagnostics.subscribe('undici:client:connected', onConnected);
}
