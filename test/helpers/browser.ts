import { existsSync } from 'node:fs';
import { Browser, chromium } from 'playwright-core';

/** Where the system's Chromium is: `CHROMIUM_PATH`, else Debian's `chromium` package. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/**
 * Browser tests run when Chromium is there. Without it they are skipped with one printed line, unless
 * `DURABLE_TEST_BROWSER=required` (set by `.ci/run`), which makes a missing browser a failure: in CI the
 * browser tests never silently stop running.
 */
export function browserTestsRun(): boolean {
  return existsSync(CHROMIUM) || process.env.DURABLE_TEST_BROWSER === 'required';
}

/** `describe` for tests that need a browser: skipped (with one printed line) when there is none. */
export function describeWithBrowser(name: string, fn: () => void): void {
  if (browserTestsRun()) return describe(name, fn);
  console.log(
    `skipped "${name}": no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH; DURABLE_TEST_BROWSER=required makes this a failure)`,
  );
  describe.skip(name, fn);
}

/** The system's headless Chromium (Debian's `chromium` package; `.ci/run` installs it). */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    headless: true,
  });
}
