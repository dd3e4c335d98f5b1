import { readFileSync } from 'node:fs';
import http from 'node:http';
import net, { AddressInfo } from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { inCall, settle, testLease as lease } from '../../../test/helpers/call-gate';
import { installFencedTransport } from './fenced-transport';

/**
 * The fenced transport beyond HTTP, without a database: a write on a `net` or `tls` socket made inside
 * a gated call is checked at the write with that call's gate, and a refused one leaves nothing (the
 * socket is destroyed, the write's callback gets the error); a socket still connecting is checked
 * again when it connects. Writes outside calls, on accepted sockets and from finished calls are
 * untouched. (ws and http2: fenced-ws-http2.spec.ts.)
 */
describe('fenced transport: net and tls sockets', () => {
  const tlsDir = path.join(__dirname, '..', '..', '..', 'test', 'fixtures', 'tls');
  const cert = readFileSync(path.join(tlsDir, 'localhost-cert.pem'));
  const key = readFileSync(path.join(tlsDir, 'localhost-key.pem'));
  /** Bytes received per server, as text. */
  const got = { net: '', tls: '' };
  let netServer: net.Server;
  let tlsServer: tls.Server;
  let netPort: number;
  let tlsPort: number;
  const accepted: net.Socket[] = [];

  beforeAll(async () => {
    installFencedTransport();
    netServer = net.createServer((s) => {
      accepted.push(s);
      s.on('data', (d) => (got.net += d.toString()));
      s.on('error', () => undefined);
    });
    tlsServer = tls.createServer({ cert, key }, (s) => {
      accepted.push(s);
      s.on('data', (d) => (got.tls += d.toString()));
      s.on('error', () => undefined);
    });
    await new Promise<void>((r) => netServer.listen(0, '127.0.0.1', r));
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r));
    netPort = (netServer.address() as AddressInfo).port;
    tlsPort = (tlsServer.address() as AddressInfo).port;
  });
  afterAll(async () => {
    accepted.forEach((s) => s.destroy());
    await new Promise((r) => netServer.close(r));
    await new Promise((r) => tlsServer.close(r));
  });
  beforeEach(() => {
    got.net = '';
    got.tls = '';
  });

  /** A resolver that answers after `ms`: the socket stays `connecting` that long. */
  const slowLookup =
    (ms: number): net.LookupFunction =>
    (_host, opts, cb) =>
      setTimeout(() => {
        const done = cb as (e: null, a: unknown, f?: number) => void;
        if (opts.all) done(null, [{ address: '127.0.0.1', family: 4 }]);
        else done(null, '127.0.0.1', 4);
      }, ms);

  type Connect = (lookupMs?: number) => Promise<net.Socket> | net.Socket;
  const connectors: Record<'net' | 'tls', Connect> = {
    net: (lookupMs) => {
      const s = net.connect({ host: 'fenced.test', port: netPort, lookup: slowLookup(lookupMs ?? 0) });
      s.on('error', () => undefined);
      return lookupMs ? s : new Promise((r) => s.once('connect', () => r(s)));
    },
    tls: (lookupMs) => {
      const s = tls.connect({
        host: 'fenced.test',
        servername: 'localhost',
        port: tlsPort,
        ca: cert,
        lookup: slowLookup(lookupMs ?? 0),
      });
      s.on('error', () => undefined);
      return lookupMs ? s : new Promise((r) => s.once('secureConnect', () => r(s)));
    },
  };

  for (const kind of ['net', 'tls'] as const) {
    describe(kind, () => {
      it('a write leaves while the gate holds; a refused one leaves nothing and destroys the socket', async () => {
        const socket = await connectors[kind]();
        const g = lease();
        expect(inCall(g, () => socket.write('one;'))).toBe(true);
        await settle();
        expect(got[kind]).toBe('one;');
        g.refuse = true;
        const errors: unknown[] = [];
        socket.on('error', (e) => errors.push(e));
        const written = await inCall(
          g,
          () => new Promise((resolve) => socket.write('two;', (err) => resolve(err ?? 'written'))),
        );
        expect(String(written)).toContain('lease lost (test)');
        await settle();
        expect(got[kind]).toBe('one;');
        expect(socket.destroyed).toBe(true);
        expect(String(errors[0])).toContain('lease lost (test)');
        expect(g.checks).toBe(2);
      });

      it('end(data) is checked too', async () => {
        const socket = await connectors[kind]();
        const g = lease(true);
        inCall(g, () => socket.end('bye;'));
        await settle();
        expect(got[kind]).toBe('');
        expect(socket.destroyed).toBe(true);
      });

      it('a write to a socket still connecting is checked again when it connects, before it leaves', async () => {
        const socket = (await connectors[kind](200)) as net.Socket;
        const g = lease();
        await inCall(g, async () => {
          socket.write('early;'); // passes now: the lease holds
          expect(socket.connecting).toBe(true);
          g.refuse = true; // the lease is lost while the socket connects (the call still runs)
          await new Promise((r) => setTimeout(r, 500));
        });
        expect(got[kind]).toBe('');
        expect(socket.destroyed).toBe(true);
        expect(g.checks).toBe(2);
        // The same while the lease holds: the bytes leave once connected.
        const ok = (await connectors[kind](200)) as net.Socket;
        const h = lease();
        await inCall(h, async () => {
          ok.write('later;');
          await new Promise((r) => setTimeout(r, 500));
        });
        expect(got[kind]).toBe('later;');
        expect(h.checks).toBe(2);
        ok.destroy();
      });

      it('writes outside a call, and from a call that ended, are not checked', async () => {
        const socket = await connectors[kind]();
        const g = lease(true);
        socket.write('outside;');
        let late!: Promise<void>;
        await inCall(g, async () => {
          late = new Promise<void>((r) => setTimeout(r, 20)).then(() => void socket.write('late;'));
        });
        await late;
        await settle();
        expect(got[kind]).toBe('outside;late;');
        expect(g.checks).toBe(0);
        socket.destroy();
      });
    });
  }

  it("a server's accepted socket and an HTTP server's response are not checked (not the call's writes)", async () => {
    const g = lease(true);
    const server = http.createServer((_req, res) => inCall(g, () => res.end('answer')));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(await res.text()).toBe('answer');
      const client = await connectors.net();
      await settle();
      const mine = accepted[accepted.length - 1];
      inCall(g, () => mine.write('from the server;'));
      const echoed = await new Promise<string>((r) => client.once('data', (d) => r(d.toString())));
      expect(echoed).toBe('from the server;');
      expect(g.checks).toBe(0);
      client.destroy();
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});
