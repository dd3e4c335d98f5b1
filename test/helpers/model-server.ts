import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A loopback model for tests: every turn it is asked, by run and step; a prompt starting BROKEN gets garbage. */
export interface ModelServer {
  url: string;
  asked: Array<{ run: string; step: number; prompt: string }>;
  close(): Promise<void>;
}

export async function startModelServer(): Promise<ModelServer> {
  const asked: ModelServer['asked'] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const { run, step, prompt } = JSON.parse(body) as { run: string; step: number; prompt: string };
      asked.push({ run, step, prompt });
      const text = prompt.startsWith('BROKEN') ? '<<garbage>>' : `answer ${step} to [${prompt}]`;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ text }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    asked,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
