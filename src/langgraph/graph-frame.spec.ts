import { answeredJournal, ownKey } from './graph-frame';
import type { GraphFrame, JournalEntry } from './graph-frame';

describe('langgraph ownKey: a tool call id as a command key of its own', () => {
  it('keeps an id the engine accepts as it is', () => {
    expect(ownKey('call_a')).toBe('call_a');
    expect(ownKey('toolu_01A.b-c')).toBe('toolu_01A.b-c');
  });

  it('rewrites other ids into the allowed alphabet and length, distinct and stable', () => {
    const rewritten = [ownKey('call a'), ownKey('call:a'), ownKey('x'.repeat(201)), ownKey('')];
    for (const k of rewritten) expect(k).toMatch(/^[A-Za-z0-9_.-]{1,200}$/);
    expect(ownKey('call a')).not.toBe(ownKey('call_a'));
    expect(ownKey('call a')).not.toBe(ownKey('call:a'));
    expect(ownKey('call a')).toBe(ownKey('call a'));
  });
});

describe('langgraph answeredJournal: model answers take no position', () => {
  const model = (key: string): JournalEntry => ({ kind: 'model', name: 'model:m', key, usage: null });
  const command: JournalEntry = { kind: 'command', name: 'refund', key: 'call_a', args: '{}' };

  it('writes a model answer made after a call still in flight, and only grows', () => {
    const frame = { journal: [] as Array<{ entry: JournalEntry; done: boolean }> } as GraphFrame;
    const inFlight = { entry: command, done: false };
    frame.journal.push(inFlight, { entry: model('m1'), done: true });
    const before = answeredJournal(frame);
    expect(before).toEqual([model('m1')]);
    inFlight.done = true;
    frame.journal.push({ entry: model('m2'), done: true });
    const after = answeredJournal(frame);
    expect(after).toEqual([command, model('m1'), model('m2')]);
    expect(before.every((e) => after.includes(e))).toBe(true);
  });
});
