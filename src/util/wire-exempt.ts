/**
 * The fenced transport's mark on a socket whose writes its socket check leaves alone: they are checked
 * where their request or query is made (a pg connection, an undici socket), or are the engine's own.
 * A TLS socket over a marked socket is exempt too. Set as a property, so that it is read through
 * an http2 session's socket proxy as well.
 * @internal
 */
export const WIRE_EXEMPT = Symbol('durable.wireExempt');

/** @internal */
export type WireExemptable = { [WIRE_EXEMPT]?: true; _parent?: WireExemptable | null };

/** Marks `socket` (if any) exempt from the socket check. @internal */
export function exemptFromWireCheck(socket: object | null | undefined): void {
  if (socket && !(socket as WireExemptable)[WIRE_EXEMPT]) (socket as WireExemptable)[WIRE_EXEMPT] = true;
}

/** Whether `socket` or the socket a TLS socket wraps is marked. @internal */
export function isWireExempt(socket: WireExemptable): boolean {
  return socket[WIRE_EXEMPT] === true || socket._parent?.[WIRE_EXEMPT] === true;
}
