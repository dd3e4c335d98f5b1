import { createHash } from 'node:crypto';
import { PAGE_SCRIPT } from './page-script';

/**
 * The inspector's CSP: nothing from elsewhere, the one inline script allowed by its hash, requests only
 * to this origin, and no framing (an admin page inside someone's iframe is a clickjacking target).
 */
export const INSPECTOR_CSP = [
  "default-src 'none'",
  "style-src 'unsafe-inline'",
  `script-src 'sha256-${createHash('sha256').update(PAGE_SCRIPT).digest('base64')}'`,
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');
