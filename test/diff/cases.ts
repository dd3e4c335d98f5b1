/**
 * From a generated case to one the durable run is compared on. The plain run lists every occurrence;
 * while two that are not causally ordered are closer than GAP_UNITS, one of them moves a unit later: a
 * signal arrives later (past the case's length it is dropped: it never comes), or the step, command,
 * sleep, timeout or hung step's attempt that made it lasts a unit longer (a loop's body for every item). A case whose events
 * cannot be spread that way, that never returns, or that is too long is not run (`invalid`). The repair
 * is a function of the generated case, so fast-check shrinks the generated case and repairs each shrink.
 */
import { GAP_UNITS, type DiffCase, type Op, type Profile } from './program';
import { runPlain, type Occurrence, type PlainResult } from './plain';

export interface Prepared {
  c: DiffCase;
  plain: PlainResult;
}

const MAX_ROUNDS = 80;

export async function prepare(raw: DiffCase, p: Profile): Promise<Prepared | { invalid: string }> {
  let c: DiffCase = { ...raw, signals: raw.signals.map((s) => ({ ...s })) };
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const plain = await runPlain(c, undefined, p.maxUnits);
    if (plain.invalid) return { invalid: plain.invalid };
    const conflict = spacing(plain.occurrences, plain.horizon);
    if (!conflict) return { c, plain };
    const next = later(c, conflict[1], p) ?? later(c, conflict[0], p);
    if (!next)
      return {
        invalid: `${conflict[0].what} @${conflict[0].time} and ${conflict[1].what} @${conflict[1].time} compete`,
      };
    c = next;
  }
  return { invalid: 'events could not be spread' };
}

/** The case with occurrence `o` a unit later, or null when it cannot move. */
function later(c: DiffCase, o: Occurrence, p: Profile): DiffCase | null {
  if (o.what === 'cancel' && c.cancel !== undefined)
    return c.cancel + 1 > p.maxUnits ? { ...c, cancel: undefined } : { ...c, cancel: c.cancel + 1 };
  if (o.what === 'deploy') return null;
  if (o.signal !== undefined) {
    const signals = c.signals.map((s, j) => (j === o.signal ? { ...s, at: s.at + 1 } : s));
    if (signals[o.signal].at > p.maxUnits) signals.splice(o.signal, 1);
    return { ...c, signals };
  }
  const [kind, label] = o.what.split(' ');
  if (!['step', 'cmd', 'sleep', 'timeout', 'child', 'hang'].includes(kind)) return null;
  const ops = lengthen(c.ops, label.split(/(?=[./])/), kind);
  return ops ? { ...c, ops } : null;
}

/** The ops with the leaf at `path` (`['1', '.2', '/0']`) a unit longer; null when it is not there. */
function lengthen(ops: Op[], path: string[], kind: string): Op[] | null {
  const [head, ...rest] = path;
  const i = Number(head.replace(/^[./]/, ''));
  if (head.startsWith('/')) return null; // an item is handled by its loop
  const op = ops[i];
  if (!op) return null;
  const grown = grow(op, rest, kind);
  return grown ? ops.map((o, j) => (j === i ? grown : o)) : null;
}

function grow(op: Op, rest: string[], kind: string): Op | null {
  if (!rest.length) {
    if ((op.t === 'step' || op.t === 'cmd') && kind === op.t) return { ...op, d: op.d + 1 };
    if (op.t === 'sleep' && kind === 'sleep') return { ...op, n: op.n + 1 };
    if ((op.t === 'wait' || op.t === 'child') && kind === 'timeout' && op.timeout !== null)
      return { ...op, timeout: op.timeout + 1 };
    if (op.t === 'child' && kind === 'child') return { ...op, d: op.d + 1 };
    // A hung step: its attempts' timeout, or its second attempt's length.
    if (op.t === 'hang' && kind === 'timeout' && op.timeout !== null)
      return { ...op, timeout: op.timeout + 1 };
    if (op.t === 'hang' && kind === 'hang' && op.then !== null) return { ...op, then: op.then + 1 };
    return null;
  }
  if (op.t === 'patch') {
    // An item's path `/x` then `.0` (the new path, a) or `.1` (the old one, b).
    if (!rest[0].startsWith('/') || !rest[1]) return null;
    const which = rest[1] === '.0' ? 'a' : 'b';
    const grown = grow(op[which], rest.slice(2), kind);
    return grown ? { ...op, [which]: grown } : null;
  }
  if (op.t === 'loop') {
    if (!rest[0].startsWith('/')) return null;
    const body = grow(op.body, rest.slice(1), kind);
    return body ? { ...op, body } : null;
  }
  if (op.t === 'try') {
    const body = rest[0] === '.0' ? grow(op.body, rest.slice(1), kind) : null;
    return body ? { ...op, body } : null;
  }
  if (!('ops' in op)) return null;
  const ops = lengthen(op.ops, rest, kind);
  return ops ? { ...op, ops } : null;
}

/**
 * Two occurrences not causally ordered and closer than GAP_UNITS (up to `end`: run()'s end, or the last
 * catch or finally block, which may run after it or after a cancel), or null. A wait
 * served from the mailbox is ready when it is called: it is its caller's moment, checked as its caller.
 */
export function spacing(occ: Occurrence[], end: number): [Occurrence, Occurrence] | null {
  const ancestors = (o: Occurrence) => {
    const s = new Set<number>();
    for (let p = o.parent; p !== null; p = occ[p].parent) s.add(p);
    return s;
  };
  const anc = occ.map(ancestors);
  for (const x of occ)
    for (const y of occ) {
      if (y.id <= x.id || (x.time > end && y.time > end)) continue;
      if (x.what.startsWith('mailbox') || y.what.startsWith('mailbox')) continue;
      if (Math.abs(x.time - y.time) >= GAP_UNITS || anc[x.id].has(y.id) || anc[y.id].has(x.id)) continue;
      return [x, y];
    }
  return null;
}
