import { request } from 'node:http';

/** One SSE message as the wire carries it. */
export interface Sent {
  id?: string;
  event?: string;
  data: any;
}

/**
 * Reads a Server-Sent Events response: every message until the server ends it, or until `stopAfter` messages with an
 * id (then the client disconnects, as a dropped connection would).
 */
export function readSse(url: string, lastEventId?: string, stopAfter = Infinity): Promise<Sent[]> {
  return new Promise((resolve, reject) => {
    const got: Sent[] = [];
    const req = request(url, { headers: lastEventId ? { 'last-event-id': lastEventId } : {} }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let at: number;
        while ((at = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, at);
          buf = buf.slice(at + 2);
          const msg: Sent = { data: null };
          for (const line of block.split('\n')) {
            const [field, ...rest] = line.split(':');
            const value = rest.join(':').replace(/^ /, '');
            if (field === 'id') msg.id = value;
            else if (field === 'event') msg.event = value;
            else if (field === 'data') msg.data = JSON.parse(value);
          }
          if (block.trim() && !block.startsWith(':')) got.push(msg);
          if (got.filter((m) => m.id).length >= stopAfter) {
            req.destroy();
            return resolve(got);
          }
        }
      });
      res.on('end', () => resolve(got));
    });
    req.on('error', (err) => (got.length ? resolve(got) : reject(err)));
    req.end();
  });
}
