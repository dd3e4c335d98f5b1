/**
 * Issue 35, part E: the differential test, the oracle the model test lacks. Generated programs (steps,
 * commands, sleeps, signal waits under race / any / all / allSettled, sequences, loops, try/catch/finally
 * with counters, hung steps, with scripted signals and cancels) run as plain JavaScript on a virtual clock
 * (test/diff/plain.ts) and durably on the real engine with real workers; outputs, effects at the target,
 * the order of events and the catch/finally blocks each execution of run() ran must match (issue 45).
 * The short profile of `npm run chaos:diff` (test/diff/README.md): fixed seeds, a few dozen cases;
 * the long one is `npm run chaos:diff -- --cases N` (or `npm run chaos:model -- --differential`).
 */
import { killFault, killWindow } from '../diff/faults';
import { formatPower, mutationPower } from '../diff/power';
import { runDifferential, type DiffOptions } from '../diff/property';
import { FAULTS, SHORT, UNIT_MS } from '../diff/program';
import { formatReport } from '../diff/report';
import { inProcessRig, processRig, type Rig } from '../diff/setup';

// Chosen (plain runs only) so that its first 32 comparable cases exercise every rule of the table once or
// more (cancels, child waits, patches in loops, try/catch/finally across parks, hung steps with and without
// timeouts, cancels while a body hangs included), but 'loser child ended after its race', which no seed up
// to 700 reaches in 32 cases beside the others (the long profile does). About 40 s.
const SEED = 144;
const CASES = 32;
// The mutations' cases (plain runs of 150 cases; three per mutation run durably, none with a hung step).
const MUTATION_SEED = 611;
// Its first three kill cases: in each, a timer or timeout registered with the killed step or command must
// still beat it (or come after it) as in the plain run after the takeover: `any(cmd 15, wait b ≤17)`
// followed by a try around hung steps, `all(sleep 11, step 15)`, and `any(sleep 17, step 19)` after a
// try that parks around a hung step (its catch and finally blocks reported from the worker processes).
const FAULT_SEED = 3;
/** The issue 45 shapes the short profile must reach (a case of each at least). */
const HUNG_AND_BLOCKS = [
  'try: finally ran',
  'try: catch ran',
  'try: catch rethrew',
  'park inside a try block',
  'a try spanned a park: every execution checked',
  'hang: failed with StepTimeoutError',
  'hang: timed out, retried',
  'hang: its second attempt returned',
  'hang deaf: abandoned after its grace',
  'cancel while a body hangs',
  'hung loser abandoned after run() returned',
];
const log = (line: string) => process.stdout.write(`[diff] ${line}\n`);

describe('differential: plain JavaScript against the durable run (issue 35 E)', () => {
  describe('workers in this process', () => {
    let rig: Rig;
    beforeAll(async () => {
      rig = await inProcessRig();
    }, 60_000);
    afterAll(async () => {
      await rig?.close();
    });

    it('generated programs: the same output, effects, order of events and catch/finally blocks (fixed seed, 32 cases, the rules)', async () => {
      const report = await runDifferential(rig.env, {
        cases: CASES,
        seed: SEED,
        profile: SHORT,
        concurrency: 4,
        shrinkMs: 30_000,
        log,
      });
      log(formatReport(report, 'differential'));
      expect(report.runs).toHaveLength(CASES);
      const missing = HUNG_AND_BLOCKS.filter((rule) => !report.coverage.get(rule));
      expect(missing).toEqual([]);
      if (report.divergent.length)
        throw new Error(
          `${report.divergent.length} of ${report.runs.length} cases diverge (seed ${SEED}); the report above lists them, with the shrunk counterexample`,
        );
    }, 150_000);

    it('catches a wrong implementation: each deliberate mutation of the durable interpreter diverges', async () => {
      // Units twice as long as the comparison's: a mutation is caught when its run shows the wrong
      // order, and beside the rest of the suite on 2 cores a timer or a settle may be late by more than
      // half of a 400 ms gap (a mutated run then agreed by accident: 1 of 3 caught under such load).
      const power = await mutationPower(
        { ...rig.env, unitMs: 2 * UNIT_MS },
        {
          seed: MUTATION_SEED,
          cases: 150, // plain runs only (cheap): three per mutation run durably
          profile: SHORT,
          concurrency: 4,
          durable: 3,
          log,
        },
      );
      log(formatPower(power));
      for (const m of power.mutations) {
        expect({ mutation: m.mutation, observable: m.observable > 0 }).toEqual({
          mutation: m.mutation,
          observable: true,
        });
        expect({ mutation: m.mutation, caught: m.caught }).toEqual({ mutation: m.mutation, caught: m.tried });
      }
    }, 180_000);
  });

  describe('a worker process killed mid-step, another taking over', () => {
    let rig: Rig;
    beforeAll(async () => {
      rig = await processRig(4); // three kills, no boot between cases
    }, 90_000);
    afterAll(async () => {
      await rig?.close();
    });

    it('the run taken over still agrees with the plain run (3 cases, one kill each)', async () => {
      const o: DiffOptions = {
        cases: 3,
        seed: FAULT_SEED,
        profile: FAULTS,
        concurrency: 1,
        shrinkMs: 0,
        accept: (p) => killWindow(p.plain) !== null,
        fault: (p) => killFault(rig, killWindow(p.plain)!),
        log,
      };
      const report = await runDifferential(rig.env, o);
      log(formatReport(report, 'differential with kills'));
      expect(report.coverage.get('fault: killed')).toBe(3);
      expect(report.coverage.get('fault: takeover')).toBe(3);
      if (report.divergent.length)
        throw new Error(
          `${report.divergent.length} of 3 cases diverge after a takeover: see the report above`,
        );
    }, 120_000);
  });
});
