import { createServer, Socket } from 'node:net';

/**
 * A TCP proxy on 127.0.0.1 in front of a PostgreSQL server, as a DNS flip, HAProxy or PgBouncer is in
 * front of a primary: `switchTo` points new connections at another port and cuts the open ones;
 * `pause` stops forwarding (the bytes wait; a replication stream stalls as behind a congested link);
 * `cut` drops every open connection, with what it had not forwarded; `deafen` keeps forwarding what
 * clients send on the open connections but drops the server's answers (a statement that commits while
 * its answer is lost, once the connection is cut).
 */
export interface TcpSwitch {
  port: number;
  switchTo(targetPort: number): void;
  pause(): void;
  cut(): void;
  deafen(): void;
  close(): Promise<void>;
}

export async function startTcpSwitch(targetPort: number): Promise<TcpSwitch> {
  let target = targetPort;
  let paused = false;
  const open = new Set<{ client: Socket; upstream: Socket }>();
  const server = createServer((client) => {
    const upstream = new Socket();
    const pair = { client, upstream };
    open.add(pair);
    const end = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
    upstream.connect(target, '127.0.0.1', () => {
      client.pipe(upstream);
      upstream.pipe(client);
      if (paused) {
        client.pause();
        upstream.pause();
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const cut = () => {
    for (const { client, upstream } of open) {
      client.destroy();
      upstream.destroy();
    }
    open.clear();
  };
  return {
    port: (server.address() as { port: number }).port,
    switchTo(port) {
      target = port;
      paused = false;
      cut();
    },
    pause() {
      paused = true;
      for (const { client, upstream } of open) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    cut,
    deafen() {
      for (const { client, upstream } of open) {
        upstream.unpipe(client);
        upstream.on('data', () => undefined);
      }
    },
    close: () => {
      cut();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}
