import { runFailover } from '../failover/failover-run';

/**
 * A PostgreSQL failover under a workload (issue 23, item 5): a primary and a streaming standby started
 * by the test on ports of their own, two worker processes behind a switch, a promotion mid-workload
 * (test/failover/failover-run.ts; `npm run failover` runs more trials and larger ones).
 */
describe('PostgreSQL failover', () => {
  it('synchronous replication: nothing acknowledged is lost, nothing is charged twice, every run finishes', async () => {
    const r = await runFailover({ mode: 'synchronous', runs: 80, lagMs: 1000 });
    // The failover happened mid-workload: runs had finished, others were in flight.
    expect(r.succeededBefore).toBeGreaterThan(0);
    expect(r.inFlightAtFailover).toBeGreaterThan(0);
    expect(r).toMatchObject({
      succeededRunAgain: 0,
      succeededWithMissingCheckpoint: 0,
      keysChargedTwice: 0,
      fencingTokensIssuedTwice: 0,
      succeededAfter: 80,
    });
  }, 180_000);

  it('asynchronous replication: the promotion loses acknowledged commits (what the docs warn of); every run still ends', async () => {
    const r = await runFailover({ mode: 'asynchronous', runs: 80, lagMs: 1000 });
    console.log(`asynchronous failover: ${JSON.stringify(r)}`);
    // The harness reproduces the loss it exists to measure: claims issued again, finished runs run again.
    expect(r.fencingTokensIssuedTwice + r.succeededRunAgain).toBeGreaterThan(0);
    // Every run still ends (the workers reach the new primary through the switch).
    expect(r.succeededAfter).toBe(80);
    // Not yet (issue 23, items 2-4): 0 keys charged twice, 0 fencing tokens issued twice, and no run
    // succeeded with a checkpoint missing (`npm run failover` measured 1 such run in 600 at 0.65 s lag).
  }, 180_000);
});
