/**
 * The fenced transfer service: `node -r ts-node/register/transpile-only examples/fenced-target/main.ts`
 * on http://127.0.0.1:3100 (PORT to change it), on the database at DATABASE_URL.
 *
 *   curl -s -XPOST localhost:3100/transfers -H 'content-type: application/json' \
 *     -H 'durable-fence: run=r1;timeline=1;epoch=4' -d '{"idempotencyKey":"k1","account":"acc-1","amountCents":500}'
 *   curl -s localhost:3100/transfers/k1 -H 'durable-fence: run=r1;timeline=1;epoch=3'   # 409: a stale claim
 */
import 'reflect-metadata';
import { INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FencedTargetModule } from './fenced-target.module';

/** Boots the service and listens on `port` (0: a free one) of 127.0.0.1; `url` is its base URL. */
export async function startFencedTarget(options: {
  databaseUrl: string;
  port?: number;
  logger?: false | ('error' | 'warn' | 'log')[];
}): Promise<{ app: INestApplication; url: string }> {
  const app = await NestFactory.create(FencedTargetModule.forRoot({ databaseUrl: options.databaseUrl }), {
    logger: options.logger ?? ['error', 'warn'],
  });
  await app.listen(options.port ?? 0, '127.0.0.1');
  return { app, url: await app.getUrl() };
}

if (require.main === module) {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    console.error('DATABASE_URL is required (postgres://user@host:5432/db)');
    process.exit(2);
  }
  startFencedTarget({ databaseUrl, port: Number(process.env.PORT ?? 3100), logger: ['error', 'warn', 'log'] })
    .then(({ url }) => console.log(`fenced transfer service on ${url}`))
    .catch((err) => {
      console.error(err);
      process.exit(1);
    });
}
