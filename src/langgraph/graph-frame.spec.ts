import { ownKey } from './graph-frame';

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
