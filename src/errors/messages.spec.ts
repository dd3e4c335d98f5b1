import { DuplicateRegistrationError } from './duplicate-registration.error';
import { NonDeterminismError } from './non-determinism.error';

/** Issue 36, part 4: messages say what happened and what to do. */
describe('error messages', () => {
  it('NonDeterminismError says the run is held (not failed) and how to resume it', () => {
    const m = new NonDeterminismError('r1', 3, 'old_tool', 'new_tool').message;
    expect(m).toContain('The run is held');
    expect(m).toContain('RunRepository.retry');
    expect(m).not.toContain('was failed');
  });

  it('a workflow kind declared twice points at `version` (a new version of the same kind)', () => {
    const wf = new DuplicateRegistrationError('Workflow kind', 'agent', 'A', 'B').message;
    expect(wf).toContain('its own `version`');
    const step = new DuplicateRegistrationError('Step name', 'think', 'A.a', 'B.b').message;
    expect(step).not.toContain('version');
  });
});
