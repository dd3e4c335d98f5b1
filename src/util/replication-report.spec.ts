import { replicationReport, ReplicationInput } from './replication-report';

const base: ReplicationInput = {
  synchronousCommit: 'on',
  synchronousStandbyNames: '',
  inRecovery: false,
  standbys: [],
};
const standby = (name: string, syncState: string | null) => ({ name, state: 'streaming', syncState });

describe('replicationReport', () => {
  it('one server: single, quiet with synchronous_commit on, a warning with it off', () => {
    expect(replicationReport(base)).toMatchObject({ mode: 'single', warnings: [] });
    expect(replicationReport({ ...base, synchronousCommit: 'local' }).warnings).toEqual([]);
    const off = replicationReport({ ...base, synchronousCommit: 'off' });
    expect(off.mode).toBe('single');
    expect(off.warnings).toEqual([expect.stringContaining('synchronous_commit is off')]);
  });

  it('a standby streaming with nothing required, or commits that do not wait for it: asynchronous', () => {
    const plain = replicationReport({ ...base, standbys: [standby('s1', 'async')] });
    expect(plain.mode).toBe('asynchronous');
    expect(plain.warnings).toEqual([expect.stringContaining('synchronous_standby_names is empty')]);
    for (const commit of ['off', 'local', 'remote_write']) {
      const r = replicationReport({
        ...base,
        synchronousCommit: commit,
        synchronousStandbyNames: 's1',
        standbys: [standby('s1', 'sync')],
      });
      expect({ commit, mode: r.mode }).toEqual({ commit, mode: 'asynchronous' });
      expect(r.warnings).toEqual([expect.stringContaining(`synchronous_commit is ${commit} for the module`)]);
    }
    // Required but none connected yet, commits not waiting: still asynchronous.
    expect(replicationReport({ ...base, synchronousCommit: 'off', synchronousStandbyNames: '*' }).mode).toBe(
      'asynchronous',
    );
  });

  it('commits that wait for a synchronous standby: synchronous; other standbys and a missing one are said', () => {
    for (const commit of ['on', 'remote_apply']) {
      const r = replicationReport({
        ...base,
        synchronousCommit: commit,
        synchronousStandbyNames: 'FIRST 1 (s1)',
        standbys: [standby('s1', 'sync')],
      });
      expect(r).toMatchObject({ mode: 'synchronous', warnings: [] });
    }
    const quorum = replicationReport({
      ...base,
      synchronousStandbyNames: 'ANY 1 (s1, s2)',
      standbys: [standby('s1', 'quorum'), standby('s2', 'quorum')],
    });
    expect(quorum).toMatchObject({ mode: 'synchronous', warnings: [] });
    const mixed = replicationReport({
      ...base,
      synchronousStandbyNames: 's1',
      standbys: [standby('s1', 'sync'), standby('reports', 'async'), standby('s3', 'potential')],
    });
    expect(mixed.mode).toBe('synchronous');
    expect(mixed.warnings).toEqual([
      expect.stringContaining('reports (async), s3 (potential) are not synchronous'),
    ]);
    const none = replicationReport({ ...base, synchronousStandbyNames: 's1' });
    expect(none.mode).toBe('synchronous');
    expect(none.warnings).toEqual([expect.stringContaining('no synchronous standby is connected')]);
  });

  it('hidden sync states and a standby connection are said', () => {
    const hidden = replicationReport({
      ...base,
      synchronousStandbyNames: 's1',
      standbys: [{ name: 's1', state: null, syncState: null }],
    });
    expect(hidden.mode).toBe('synchronous');
    expect(hidden.warnings).toEqual([expect.stringContaining('grant it pg_monitor')]);
    const onStandby = replicationReport({ ...base, inRecovery: true });
    expect(onStandby.mode).toBe('standby');
    expect(onStandby.warnings).toEqual([expect.stringContaining('connected to a standby')]);
  });
});
