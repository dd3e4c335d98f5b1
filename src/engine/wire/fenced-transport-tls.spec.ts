import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { RunFrame } from '../run-storage';
import { installFencedTransport } from './fenced-transport';
import { gated, WireGate } from './wire-gate';

describe('fenced transport over TLS (node:https: the check waits for the handshake)', () => {
  const tlsDir = path.join(__dirname, '..', '..', '..', 'test', 'fixtures', 'tls');
  const cert = readFileSync(path.join(tlsDir, 'localhost-cert.pem'));
  const key = readFileSync(path.join(tlsDir, 'localhost-key.pem'));
  let server: https.Server;
  let url: string;
  const received: string[] = [];

  beforeAll(async () => {
    installFencedTransport();
    server = https.createServer({ cert, key }, (req, res) => {
      req.resume();
      req.on('end', () => {
        received.push(req.url!);
        res.end('ok');
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });

  const send = (path: string, agent: https.Agent) =>
    new Promise((resolve, reject) => {
      const req = https.request(`${url}${path}`, { method: 'POST', agent }, (res) => {
        res.resume();
        res.on('end', resolve);
      });
      req.on('error', reject);
      req.end('x');
    });

  it('checks on secureConnect for a new socket, at once for a reused one; a refused request sends nothing', async () => {
    const agent = new https.Agent({ ca: cert, keepAlive: true, maxSockets: 1 });
    let refuse = false;
    let checks = 0;
    const inCall = <T>(body: () => Promise<T>) =>
      gated(
        {
          gate: new WireGate(() => {
            checks++;
            return refuse ? new Error('lease lost (test)') : undefined;
          }, 'tls call'),
        } as unknown as RunFrame,
        body,
      );
    try {
      await inCall(() => send('/t1', agent)); // new socket: corked until the handshake, then checked
      await inCall(() => send('/t2', agent)); // reused socket
      expect(received).toEqual(['/t1', '/t2']);
      expect(checks).toBe(2);
      refuse = true;
      await expect(inCall(() => send('/t3', agent))).rejects.toThrow('lease lost (test)');
      agent.destroy();
      const fresh = new https.Agent({ ca: cert });
      await expect(inCall(() => send('/t4', fresh))).rejects.toThrow('lease lost (test)');
      fresh.destroy();
      await new Promise((r) => setTimeout(r, 100));
      expect(received).toEqual(['/t1', '/t2']);
    } finally {
      agent.destroy();
    }
  });
});
