import { REDACTION_FAILED, redactErrorMessage, redactValue } from './redact';

describe('redactValue / redactErrorMessage', () => {
  it('passes the value through unchanged without a hook', () => {
    const v = { a: 1 };
    expect(redactValue(undefined, 'run.input', v)).toBe(v);
    expect(redactErrorMessage(undefined, 'boom')).toBe('boom');
  });

  it('fails closed: a hook that throws yields REDACTION_FAILED, not the value', () => {
    const hook = () => {
      throw new Error('bad hook');
    };
    expect(redactValue(hook, 'run.input', { secret: 's' })).toBe(REDACTION_FAILED);
    expect(redactErrorMessage(hook, 'boom s')).toBe(REDACTION_FAILED);
  });

  it('reads an error message back from { message } or a plain string, else fails closed', () => {
    expect(redactErrorMessage((_k, v) => ({ ...v, message: 'x' }), 'boom')).toBe('x');
    expect(redactErrorMessage(() => 'y', 'boom')).toBe('y');
    expect(redactErrorMessage(() => ({}), 'boom')).toBe(REDACTION_FAILED);
    expect(redactErrorMessage(() => 'y', null)).toBeNull();
  });
});
