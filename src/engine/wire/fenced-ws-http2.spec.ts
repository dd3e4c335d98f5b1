import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { inCall, settle, testLease as lease } from '../../../test/helpers/call-gate';
import { installFencedTransport } from './fenced-transport';

/**
 * The fenced transport for WebSockets (`ws`: frames are socket writes, the opening handshake an HTTP
 * request) and http2 (nghttp2 writes from C++: a request is checked where it is made, before Node
 * submits it, and its body at each write), without a database.
 */
describe('fenced transport: ws and http2', () => {
  beforeAll(() => installFencedTransport());

  describe('ws', () => {
    let wss: WebSocketServer;
    let wsUrl: string;
    const messages: string[] = [];

    beforeAll(async () => {
      wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
      wss.on('connection', (c) => c.on('message', (m) => messages.push(m.toString())));
      await new Promise((r) => wss.once('listening', r));
      wsUrl = `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      wss.clients.forEach((c) => c.terminate());
      await new Promise((r) => wss.close(r));
    });

    it('a WebSocket opened before the call: its messages leave while the gate holds, none once refused', async () => {
      messages.splice(0);
      const ws = new WebSocket(wsUrl);
      await new Promise((r) => ws.once('open', r));
      const g = lease();
      await inCall(g, () => new Promise<void>((r, j) => ws.send('first', (e) => (e ? j(e) : r()))));
      g.refuse = true;
      const refused = await inCall(g, () => new Promise((r) => ws.send('second', (e) => r(e ?? 'sent'))));
      expect(String(refused)).toContain('lease lost (test)');
      await new Promise((r) => ws.once('close', r));
      await settle();
      expect(messages).toEqual(['first']);
      expect(g.checks).toBeGreaterThanOrEqual(2);
    });

    it('the opening handshake (an HTTP upgrade) is checked by the http hook', async () => {
      const g = lease(true);
      const failed = await inCall(g, () => new Promise((r) => new WebSocket(wsUrl).once('error', r)));
      expect(String(failed)).toContain('lease lost (test)');
      expect(g.checks).toBe(1);
    });
  });

  describe('http2', () => {
    let server: http2.Http2Server;
    let url: string;
    const seen: string[] = [];
    /** Body bytes received per path, whether or not the request ended. */
    const bodies: Record<string, string> = {};

    beforeAll(async () => {
      server = http2.createServer();
      server.on('stream', (stream, headers) => {
        stream.on('error', () => undefined);
        let body = '';
        stream.on('data', (d) => {
          body += d;
          bodies[String(headers[':path'])] = body;
        });
        stream.on('end', () => {
          seen.push(`${String(headers[':path'])}${body ? ` ${body}` : ''}`);
          stream.respond({ ':status': 200 });
          stream.end('ok');
        });
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      await new Promise((r) => server.close(r));
    });
    beforeEach(() => seen.splice(0));

    const request = (session: http2.ClientHttp2Session, p: string, body?: string) =>
      new Promise<void>((resolve, reject) => {
        const req = session.request({ ':path': p, ':method': body ? 'POST' : 'GET' });
        req.on('error', reject);
        req.on('close', resolve);
        req.resume();
        req.end(body);
      });

    it('a request on a session opened before the call leaves while the gate holds; a refused one is never submitted', async () => {
      const session = http2.connect(url);
      session.on('error', () => undefined);
      await new Promise((r) => session.once('connect', r));
      try {
        const g = lease();
        await inCall(g, () => request(session, '/one', 'x'));
        g.refuse = true;
        await expect(inCall(g, () => request(session, '/two'))).rejects.toThrow('lease lost (test)');
        await inCall(lease(), () => request(session, '/three')); // the session serves other calls
        await settle();
        expect(seen).toEqual(['/one x', '/three']);
      } finally {
        session.close();
      }
    });

    it('a request made while the session connects is checked again when Node submits it', async () => {
      const session = http2.connect(url);
      session.on('error', () => undefined);
      try {
        const g = lease();
        const sent = inCall(g, () => request(session, '/early'));
        g.refuse = true; // lost before the session connected
        await expect(sent).rejects.toThrow('lease lost (test)');
        await settle();
        expect(seen).toEqual([]);
        expect(g.checks).toBe(2);
      } finally {
        session.close();
      }
    });

    it("a request's body is checked at each write against the gate of the call that made it", async () => {
      const session = http2.connect(url);
      session.on('error', () => undefined);
      await new Promise((r) => session.once('connect', r));
      try {
        const g = lease();
        let req!: http2.ClientHttp2Stream;
        let endCall!: () => void;
        const call = inCall(g, () => {
          req = session.request({ ':path': '/stream', ':method': 'POST' });
          return new Promise<void>((r) => (endCall = r)); // the call runs on
        });
        const closed = new Promise((r) => req.on('error', r));
        req.write('part one;');
        g.refuse = true;
        req.end('part two;'); // outside the call's context: still its request's body
        expect(String(await closed)).toContain('lease lost (test)');
        endCall();
        await call;
        await settle();
        expect(seen).toEqual([]); // never ended
        expect(bodies['/stream'] ?? '').not.toContain('part two;');
      } finally {
        session.close();
      }
    });
  });
});
