import fs from 'node:fs';
import path from 'node:path';
import type { BrowserContext } from 'playwright-core';
import { ROOT, tempDir, type Teardown } from './trackd.js';

export const CHROMIUM = '/usr/bin/chromium';
export const INSTALL_CHROMIUM = 'apt-get install -y chromium';

/**
 * Debian's Chromium, headless, with a fresh profile, through playwright-core (no browser download).
 * Where it is missing the test fails, naming the one command that installs it: it never passes by skipping.
 */
export async function launchChromium(t: Teardown, executablePath = CHROMIUM): Promise<BrowserContext> {
  if (!fs.existsSync(executablePath)) throw new Error(`Chromium is missing at ${executablePath}; install it with: ${INSTALL_CHROMIUM}`);
  const { chromium } = await import('playwright-core');
  const profile = tempDir('trackd-chromium-');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    viewport: { width: 1280, height: 800 },
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  });
  return context;
}

/**
 * Where the run writes a screenshot of each view: TRACKD_SCREENSHOTS, else dist/screenshots
 * (`TRACKD_SCREENSHOTS=docs/console` refreshes the README's pictures).
 */
export function screenshotPath(name: string): string {
  const dir = path.resolve(ROOT, process.env.TRACKD_SCREENSHOTS ?? 'dist/screenshots');
  fs.mkdirSync(dir, { recursive: true });
  return path.join(dir, `${name}.png`);
}
