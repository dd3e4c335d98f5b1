/**
 * Who may open the demo's run inspector. The admin module can cancel, retry and approve runs, so the
 * demo never serves it open by accident:
 *
 * - `DEMO_ADMIN_KEY` set: the library's `ApiKeyAdminGuard` with that key (16 characters or more);
 * - `DEMO_ADMIN_ANONYMOUS=1`: `allowAnonymous: true`, for a local demo on 127.0.0.1 only, said explicitly;
 * - neither: `ApiKeyAdminGuard` with a random key made at start-up and printed once (as Jupyter does).
 *
 * A browser cannot send an `x-api-key` header by itself, so the demo turns on the admin module's sign-in
 * page (`login: true`, see inspector-app.ts): `/durable/login` takes the key and keeps a session in an
 * HttpOnly cookie. The link printed at start-up carries the key in its `#fragment`, which fills the form
 * in the browser and never reaches the server.
 */
import { randomBytes } from 'node:crypto';
import { ApiKeyAdminGuard, type DurableAdminModuleOptions } from '../../../src/admin'; // in an app: 'nestjs-durable-execution/admin'

/** Where the demo mounts the admin module: the inspector at `/durable`, the API at `/durable/api`. */
export const ADMIN_PATH = 'durable';
/** The name the event trail records as `by` for actions taken with the demo's key. */
export const DEMO_OPERATOR = 'demo-operator';

export interface DemoAdminAccess {
  /** `guard` or `allowAnonymous`, for `DurableAdminModule.forRoot`. */
  options: Pick<DurableAdminModuleOptions, 'guard' | 'allowAnonymous'>;
  /** The key the guard accepts; null when anonymous. */
  key: string | null;
  /** Where the key came from. */
  source: 'DEMO_ADMIN_KEY' | 'generated' | 'anonymous';
}

const truthy = (v: string | undefined) => v !== undefined && /^(1|true|yes)$/i.test(v.trim());

/** The demo's admin access from the environment (see the top of this file). */
export function demoAdminAccess(env: NodeJS.ProcessEnv = process.env): DemoAdminAccess {
  const given = env.DEMO_ADMIN_KEY;
  if (truthy(env.DEMO_ADMIN_ANONYMOUS)) {
    if (given) throw new Error('set either DEMO_ADMIN_KEY or DEMO_ADMIN_ANONYMOUS=1, not both');
    return { options: { allowAnonymous: true }, key: null, source: 'anonymous' };
  }
  const key = given ?? randomBytes(12).toString('hex'); // 24 characters, easy to copy
  // ApiKeyAdminGuard refuses keys shorter than 16 characters (InvalidOptionsError) at start-up.
  const guard = new ApiKeyAdminGuard({ keys: { [key]: DEMO_OPERATOR } });
  return { options: { guard }, key, source: given ? 'DEMO_ADMIN_KEY' : 'generated' };
}

/**
 * Lines to print at start-up: where the inspector is and how to get in (the sign-in link, its key in the
 * fragment for a key made here). `origin` is `http://host:port`.
 */
export function describeAccess(origin: string, access: DemoAdminAccess): string[] {
  const page = `${origin}/${ADMIN_PATH}`;
  if (!access.key) {
    return [
      `run inspector: ${page}   (API: ${page}/api/runs)`,
      '  DEMO_ADMIN_ANONYMOUS=1: no key asked; anyone who can reach this port can act on runs',
    ];
  }
  const shown = access.source === 'generated' ? access.key : '$DEMO_ADMIN_KEY';
  return [
    access.source === 'generated'
      ? `run inspector: ${page}/login#key=${shown}   (sign in, then ${page})`
      : `run inspector: ${page}/login   (sign in with $DEMO_ADMIN_KEY, then ${page})`,
    `  API: curl -H 'x-api-key: ${shown}' ${page}/api/runs`,
    access.source === 'generated'
      ? '  (a key made for this process; set DEMO_ADMIN_KEY, 16+ characters, to choose it, or DEMO_ADMIN_ANONYMOUS=1 for none)'
      : '  (the key is DEMO_ADMIN_KEY)',
  ];
}
