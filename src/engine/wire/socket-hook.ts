import net from 'node:net';
import { isWireExempt, WireExemptable } from '../../util/wire-exempt';
import type { CallGate } from '../run-storage';
import { currentGate } from './wire-gate';

/**
 * The fenced transport for writes on a `net.Socket` or a `tls.TLSSocket` (a WebSocket of `ws`, a raw
 * `net` client, an SMTP client, a Redis or MQTT client, ...): `Socket.prototype.write` and `end(data)`
 * check the gate of the live call that writes, synchronously, before the original write runs. A plain
 * write is made by its caller, so the async context at `write()` is the call's own (compare a pooled
 * HTTP request or pg query, which is written in whatever context freed its connection: those are
 * captured where they are made, see `http-hook.ts`, `undici-hook.ts`, `store/pg-wire-hook.ts`).
 *
 * - A refused write is not written: the socket is destroyed with the lease error (a protocol written
 *   in several writes, a frame header and its payload, is never left half sent and going on), the
 *   write's callback gets the error, and `write()` returns false.
 * - A socket still connecting (or a TLS socket before its handshake) is corked by the first gated
 *   write, and every gate that wrote to it is checked again on `'connect'` (`'secure'`) before it is
 *   uncorked: the bytes leave then, not at the `write()`.
 * - Left alone: sockets the other hooks check or the engine owns (marked, see `util/wire-exempt.ts`:
 *   pg connections, undici's sockets), sockets of `node:http` requests and responses (`_httpMessage`,
 *   checked by `http-hook.ts`), sockets a server accepted, and the process's stdio.
 * @internal
 */
const HELD = Symbol('durable.wireHeld');
const TARGET = Symbol('durable.wireTarget');

type GatedSocket = net.Socket &
  WireExemptable & {
    [HELD]?: CallGate[];
    [TARGET]?: string;
    _httpMessage?: unknown;
    server?: unknown;
    _server?: unknown;
    _isStdio?: boolean;
    _host?: string | null;
    encrypted?: boolean;
    _secureEstablished?: boolean;
    _tlsOptions?: { isServer?: boolean };
  };

/** Writes another hook checks, or that are not a call's effect on the outside. */
function exempt(s: GatedSocket): boolean {
  return (
    isWireExempt(s) ||
    !!s._httpMessage ||
    !!s.server ||
    !!s._server ||
    s._isStdio === true ||
    s._tlsOptions?.isServer === true
  );
}

function ready(s: GatedSocket): boolean {
  return !s.connecting && !(s.encrypted && !s._secureEstablished);
}

function targetOf(s: GatedSocket): string {
  if (s[TARGET]) return s[TARGET];
  const port = s.remotePort;
  const target = `a write to ${s._host ?? s.remoteAddress ?? 'a socket'}${port ? `:${port}` : ''}`;
  if (port) s[TARGET] = target;
  return target;
}

/** The check of one gated write: the error it was refused with (the socket destroyed), or undefined. */
function refusal(s: GatedSocket, gate: CallGate): Error | undefined {
  const refused = gate.check(targetOf(s));
  if (refused) {
    s.destroy(refused);
    return refused;
  }
  if (!ready(s)) hold(s, gate);
  return undefined;
}

/** Corks a socket not yet connected until every gate that wrote to it is checked again. */
function hold(s: GatedSocket, gate: CallGate): void {
  const held = s[HELD];
  if (held) {
    if (!held.includes(gate)) held.push(gate);
    return;
  }
  const gates = (s[HELD] = [gate]);
  s.cork();
  s.once(s.encrypted ? 'secure' : 'connect', () => {
    s[HELD] = undefined;
    for (const g of gates) {
      const refused = g.check(targetOf(s));
      if (refused) return void s.destroy(refused);
    }
    s.uncork();
  });
}

/** A refused write's callback gets the error, as a write to a destroyed socket's does. */
function callBack(args: unknown[], refused: Error): void {
  const cb = args.find((a) => typeof a === 'function') as ((err: Error) => void) | undefined;
  if (cb) process.nextTick(cb, refused);
}

let installed = false;

/** Patches once per process; inert for writes outside a gated call. */
export function installSocketHook(): void {
  if (installed) return;
  installed = true;
  type Write = (this: GatedSocket, ...args: unknown[]) => boolean;
  type End = (this: GatedSocket, ...args: unknown[]) => GatedSocket;
  const proto = net.Socket.prototype as unknown as { write: Write; end: End };
  const write = proto.write;
  const end = proto.end;
  proto.write = function (this: GatedSocket, ...args: unknown[]): boolean {
    const gate = currentGate();
    if (gate && !exempt(this)) {
      const refused = refusal(this, gate);
      if (refused) {
        callBack(args, refused);
        return false;
      }
    }
    return write.apply(this, args);
  };
  // `end(data)` writes without going through `write()`.
  proto.end = function (this: GatedSocket, ...args: unknown[]): GatedSocket {
    const data = args[0];
    if (data !== undefined && data !== null && typeof data !== 'function') {
      const gate = currentGate();
      if (gate && !exempt(this)) {
        const refused = refusal(this, gate);
        if (refused) {
          callBack(args, refused);
          return this;
        }
      }
    }
    return end.apply(this, args);
  };
}
