/**
 * The fenced transfer service: `node -r ts-node/register/transpile-only examples/fenced-target/main.ts`
 * on http://127.0.0.1:3100 (PORT to change it), on the database at DATABASE_URL. DURABLE_FENCE_KEYS lists
 * the keys tokens must be signed with, `<keyId>=<secret>` separated by spaces (the workers' module option
 * `fence: { keyId, secret }`); without it tokens are not authenticated, and anyone can do this:
 *
 *   curl -s -XPOST localhost:3100/transfers -H 'content-type: application/json' \
 *     -H 'durable-fence: run=r1;timeline=1;epoch=4' -d '{"idempotencyKey":"k1","account":"acc-1","amountCents":500}'
 *   curl -s localhost:3100/transfers/k1 -H 'durable-fence: run=r1;timeline=1;epoch=3'   # 409: a stale claim
 *
 * With keys, both answer 401 DURABLE_UNAUTHENTICATED_FENCE (unsigned) and write nothing.
 */
import 'reflect-metadata';
import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FencedTargetModule, FencedTargetOptions } from './fenced-target.module';

/** Boots the service and listens on `port` (0: a free one) of 127.0.0.1; `url` is its base URL. */
export async function startFencedTarget(
  options: FencedTargetOptions & { port?: number; logger?: false | ('error' | 'warn' | 'log')[] },
): Promise<{ app: INestApplication; url: string }> {
  const { port, logger, ...target } = options;
  const app = await NestFactory.create(FencedTargetModule.forRoot(target), {
    logger: logger ?? ['error', 'warn'],
  });
  await app.listen(port ?? 0, '127.0.0.1');
  return { app, url: await app.getUrl() };
}

if (require.main === module) {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    console.error('DATABASE_URL is required (postgres://user@host:5432/db)');
    process.exit(2);
  }
  // DURABLE_FENCE_KEYS="k2=<secret> k1=<old secret>": both ids pass during a rotation.
  const keys = Object.fromEntries(
    (process.env.DURABLE_FENCE_KEYS ?? '')
      .split(/\s+/)
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const port = Number(process.env.PORT ?? 3100);
  startFencedTarget({
    databaseUrl,
    keys: Object.keys(keys).length ? keys : undefined,
    port,
    logger: ['error', 'warn', 'log'],
  })
    .then(({ url }) => console.log(`fenced transfer service on ${url}`))
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
