import diagnostics from 'node:diagnostics_channel';
import http from 'node:http';
import { AddressInfo, connect, Socket } from 'node:net';
import axios from 'axios';
import { Agent as UndiciAgent, ProxyAgent, fetch as undiciFetch } from 'undici';
import type { RunFrame } from '../run-storage';
import { installFencedTransport } from './fenced-transport';
import { gated, WireGate } from './wire-gate';

/**
 * The fenced transport's mechanics, without a database: a request made inside a gated call is checked
 * where its bytes are handed to the socket (not when it is made), with the gate of the call that made
 * it, for fetch (any dispatcher), node:http and axios; a call that ended no longer gates its requests.
 */
describe('fenced transport', () => {
  let server: http.Server;
  let url: string;
  const received: string[] = [];
  /** Requests the server holds until released (a busy pool). */
  const held: Array<() => void> = [];

  beforeAll(async () => {
    installFencedTransport();
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        received.push(req.url!);
        const answer = () => res.end('ok');
        if (req.url!.startsWith('/hold')) held.push(answer);
        else answer();
      });
    });
    server.keepAliveTimeout = 30_000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  beforeEach(() => received.splice(0));

  /** The lease of a run as its calls see it: the test sets its verdict and counts its checks. */
  interface Lease {
    refuse: boolean;
    checks: number;
  }
  const lease = (): Lease => ({ refuse: false, checks: 0 });
  /** One call of that run (a gate of its own, ended when the body settles), as the engine runs it. */
  const inCall = <T>(l: Lease, body: () => Promise<T>): Promise<T> => {
    const gate = new WireGate(() => {
      l.checks++;
      return l.refuse ? new Error('lease lost (test)') : undefined;
    }, 'test call');
    return gated({ gate } as unknown as RunFrame, body);
  };

  const clients: Record<
    string,
    (path: string, agent?: http.Agent, dispatcher?: UndiciAgent) => Promise<unknown>
  > = {
    fetch: async (path, _agent, dispatcher?: UndiciAgent) =>
      (
        await fetch(`${url}${path}`, { method: 'POST', body: 'x', dispatcher } as unknown as RequestInit)
      ).text(),
    http: (path, agent) =>
      new Promise((resolve, reject) => {
        const req = http.request(`${url}${path}`, { method: 'POST', agent }, (res) => {
          res.resume();
          res.on('end', resolve);
        });
        req.on('error', reject);
        req.end('x');
      }),
    axios: (path, agent) => axios.post(`${url}${path}`, 'x', { httpAgent: agent, proxy: false }),
  };

  for (const [name, send] of Object.entries(clients)) {
    describe(name, () => {
      it('lets a request leave while the gate holds, and refuses it (nothing sent) once it does not', async () => {
        const g = lease();
        await inCall(g, () => send('/a'));
        expect(received).toEqual(['/a']);
        g.refuse = true;
        await expect(inCall(g, () => send('/b'))).rejects.toThrow();
        await new Promise((r) => setTimeout(r, 100));
        expect(received).toEqual(['/a']);
        expect(g.checks).toBeGreaterThanOrEqual(2);
      });

      it('checks at the write, with the gate of the call that made the request (a busy pool)', async () => {
        // One connection: the second call's request waits in the pool behind the first's.
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const dispatcher = new UndiciAgent({ connections: 1 });
        try {
          const first = lease();
          const second = lease();
          const one = inCall(first, () => send('/hold-1', agent, dispatcher));
          await new Promise((r) => setTimeout(r, 150)); // on the wire, held by the server
          const two = inCall(second, () => send('/queued', agent, dispatcher)).then(
            () => 'sent',
            () => 'refused',
          );
          await new Promise((r) => setTimeout(r, 150));
          expect(received).toEqual(['/hold-1']);
          second.refuse = true; // the second call's lease ends while its request waits for the socket
          held.splice(0).forEach((answer) => answer()); // frees the socket, in the first call's context
          await one;
          expect(await two).toBe('refused');
          await new Promise((r) => setTimeout(r, 100));
          expect(received).toEqual(['/hold-1']);
          expect(first.checks).toBe(1); // the queued request never checked the first call's gate
        } finally {
          agent.destroy();
          await dispatcher.close();
        }
      });

      it('re-checks a request sent on a reused keep-alive socket', async () => {
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        try {
          const g = lease();
          await inCall(g, () => send('/k1', agent));
          g.refuse = true;
          await expect(inCall(g, () => send('/k2', agent))).rejects.toThrow();
          expect(received).toEqual(['/k1']);
        } finally {
          agent.destroy();
        }
      });
    });
  }

  // The engine's refusal halts the run, which aborts ctx.signal synchronously, inside the client's own
  // write path: a body that passed the signal to its client sees both at once.
  it.each([
    [
      'fetch',
      (path: string, signal: AbortSignal) => fetch(`${url}${path}`, { method: 'POST', body: 'x', signal }),
    ],
    [
      'http',
      (path: string, signal: AbortSignal) =>
        new Promise((resolve, reject) => {
          const req = http.request(`${url}${path}`, { method: 'POST', signal }, (res) =>
            res.resume().on('end', resolve),
          );
          req.on('error', reject);
          req.end('x');
        }),
    ],
    [
      'axios',
      (path: string, signal: AbortSignal) => axios.post(`${url}${path}`, 'x', { signal, proxy: false }),
    ],
  ])('%s: a refusal that also aborts the signal passed to the client sends nothing', async (_name, send) => {
    const run = new AbortController();
    const gate = new WireGate(() => {
      const refused = new Error('lease lost (test)');
      run.abort(refused); // as RunControl.halt does
      return refused;
    }, 'test call');
    await expect(
      gated({ gate } as unknown as RunFrame, () => send('/aborted', run.signal)),
    ).rejects.toBeTruthy();
    await new Promise((r) => setTimeout(r, 100));
    expect(received).toEqual([]);
  });

  it("a request without onConnect (another undici major) is refused at 'sendHeaders': its socket is destroyed", async () => {
    const request = { method: 'POST', origin: 'http://target.test' };
    const socket = { destroy: jest.fn() };
    const gate = new WireGate(() => new Error('lease lost (test)'), 'test call');
    let written!: () => void;
    const call = gated({ gate } as unknown as RunFrame, () => {
      diagnostics.channel('undici:request:create').publish({ request });
      return new Promise<void>((r) => (written = r)); // the call is live until its request was written
    });
    diagnostics.channel('undici:client:sendHeaders').publish({ request, socket, headers: '' });
    written();
    await call;
    expect(socket.destroy).toHaveBeenCalledWith(new Error('lease lost (test)'));
  });

  it('a request left behind by a call that ended is not gated by it', async () => {
    const g = lease();
    let late!: Promise<unknown>;
    await inCall(g, async () => {
      late = new Promise((r) => setTimeout(r, 50)).then(() => clients.fetch('/late'));
    });
    g.refuse = true;
    await late;
    expect(received).toEqual(['/late']);
    expect(g.checks).toBe(0);
  });

  it('requests outside a gated call are untouched', async () => {
    await clients.fetch('/free');
    await clients.http('/free2');
    expect(received).toEqual(['/free', '/free2']);
  });

  it("fetch with a caller's own dispatcher and through an app's ProxyAgent is gated too", async () => {
    // A tunnelling HTTP proxy on loopback (undici's ProxyAgent sends CONNECT, then the request inside).
    const proxy = http.createServer((_req, res) => res.writeHead(405).end());
    proxy.on('connect', (req: http.IncomingMessage, client: Socket, head: Buffer) => {
      const [host, port] = req.url!.split(':');
      const up = connect(Number(port), host, () => {
        client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        up.write(head);
        up.pipe(client).on('error', () => undefined);
        client.pipe(up).on('error', () => undefined);
      });
      up.on('error', () => client.destroy());
      client.on('error', () => up.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    const own = new UndiciAgent();
    const viaProxy = new ProxyAgent(proxyUrl);
    try {
      const g = lease();
      await inCall(g, () => undiciFetch(`${url}/own`, { dispatcher: own }).then((r) => r.text()));
      await inCall(g, () =>
        fetch(`${url}/proxied`, { dispatcher: viaProxy } as unknown as RequestInit).then((r) => r.text()),
      );
      expect(received).toEqual(['/own', '/proxied']);
      g.refuse = true;
      await expect(inCall(g, () => undiciFetch(`${url}/own2`, { dispatcher: own }))).rejects.toThrow();
      await expect(
        inCall(g, () => fetch(`${url}/proxied2`, { dispatcher: viaProxy } as unknown as RequestInit)),
      ).rejects.toThrow();
      await new Promise((r) => setTimeout(r, 100));
      expect(received).toEqual(['/own', '/proxied']);
    } finally {
      await own.close();
      await viaProxy.close();
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });
});
