import http2 from 'node:http2';
import { Duplex } from 'node:stream';
import { isWireExempt, WireExemptable } from '../../util/wire-exempt';
import type { CallGate } from '../run-storage';
import { currentGate } from './wire-gate';

/**
 * The fenced transport for `node:http2` clients (and gRPC's `@grpc/grpc-js`, built on it). nghttp2
 * writes a session's frames from C++, not through `Socket#write`, so the check is at the request:
 *
 * - `ClientHttp2Session.prototype.request` captures the live call that makes the request and checks
 *   its gate there, synchronously: on a connected session Node submits the request's HEADERS to
 *   nghttp2 inside `request()`, and they are written at the session's next write, in the same turn of
 *   the event loop. A refused request is never submitted: `request()` throws the lease error, and
 *   the session stays open for the process's other calls. On a session still connecting, the request
 *   is checked again right before Node submits it (on the session's `'connect'`), and a refused one
 *   is destroyed unsent.
 * - The request's body (`write()`, `end(data)` of its stream) is checked against the same gate (the
 *   call that made the request) at each write: a refused write destroys the stream (RST_STREAM).
 *
 * The prototypes are patched, so sessions opened before the hook (a gRPC channel opened at boot) are
 * covered the same. Sessions undici opens (`allowH2`) are left to `undici-hook.ts`.
 * @internal
 */
const GATE = Symbol('durable.wireGate');

type GatedStream = http2.ClientHttp2Stream & { [GATE]?: CallGate };

function exempt(session: http2.ClientHttp2Session): boolean {
  try {
    return isWireExempt(session.socket as unknown as WireExemptable);
  } catch {
    return false; // no socket bound (destroyed): the original request throws its own error
  }
}

function targetOf(session: http2.ClientHttp2Session, headers: unknown): string {
  const h = (headers ?? {}) as Record<string, unknown>;
  const method = String(h[':method'] ?? 'GET');
  const origin = (session as unknown as { originSet?: string[] }).originSet?.[0] ?? 'a session';
  return `an http2 request to ${method} ${origin}${String(h[':path'] ?? '')}`;
}

/** The prototypes of a client session and a client stream, from a session that never connects. */
function clientPrototypes(): { session: object; stream: object } | undefined {
  let session: http2.ClientHttp2Session | undefined;
  try {
    const idle = new Duplex({ read: () => undefined, write: (_c, _e, cb) => cb() });
    session = http2.connect('http://wire-hook.invalid', { createConnection: () => idle as never });
    session.on('error', () => undefined);
    const stream = session.request({ ':path': '/' });
    stream.on('error', () => undefined);
    stream.destroy();
    return { session: Object.getPrototypeOf(session), stream: Object.getPrototypeOf(stream) };
  } catch {
    return undefined;
  } finally {
    session?.destroy();
  }
}

/** A refused body write's callback gets the error. */
function callBack(args: unknown[], refused: Error): void {
  const cb = args.find((a) => typeof a === 'function') as ((err: Error) => void) | undefined;
  if (cb) process.nextTick(cb, refused);
}

let installed = false;

/** Patches once per process; inert for requests made outside a gated call. */
export function installHttp2Hook(): void {
  if (installed) return;
  installed = true;
  const protos = clientPrototypes();
  if (!protos) return;
  type Request = (this: http2.ClientHttp2Session, ...args: unknown[]) => GatedStream;
  const sessionProto = protos.session as { request: Request };
  const request = sessionProto.request;
  sessionProto.request = function (this: http2.ClientHttp2Session, ...args: unknown[]): GatedStream {
    const gate = currentGate();
    if (!gate || exempt(this)) return request.apply(this, args);
    const target = targetOf(this, args[0]);
    const refused = gate.check(target);
    if (refused) throw refused;
    const connecting = this.connecting;
    const stream = request.apply(this, args);
    stream[GATE] = gate;
    // Node submits a request made while connecting on 'connect', in a listener added before this one.
    if (connecting)
      this.prependOnceListener('connect', () => {
        const late = gate.check(target);
        if (late) stream.destroy(late);
      });
    return stream;
  };

  type Write = (this: GatedStream, ...args: unknown[]) => boolean;
  type End = (this: GatedStream, ...args: unknown[]) => GatedStream;
  const streamProto = protos.stream as { write: Write; end: End };
  const write = streamProto.write;
  const end = streamProto.end;
  const refusal = (stream: GatedStream): Error | undefined => {
    const refused = stream[GATE]?.check('the body of an http2 request');
    if (refused) stream.destroy(refused);
    return refused;
  };
  streamProto.write = function (this: GatedStream, ...args: unknown[]): boolean {
    const refused = refusal(this);
    if (!refused) return write.apply(this, args);
    callBack(args, refused);
    return false;
  };
  streamProto.end = function (this: GatedStream, ...args: unknown[]): GatedStream {
    const data = args[0];
    const refused = data !== undefined && data !== null && typeof data !== 'function' && refusal(this);
    if (!refused) return end.apply(this, args);
    callBack(args, refused);
    return this;
  };
}
