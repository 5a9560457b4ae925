// Study 000 in headless Chromium: a page and its module Web Worker, served
// from a local HTTP server, driven by playwright-core with Debian's chromium.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../lib/server.mjs';
import { chromiumThreads } from '../lib/cpu.mjs';
import { progress } from '../lib/progress.mjs';

const tsRoot = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

/** The Chromium binary: $CHROMIUM, else Debian's. */
export const chromiumPath = () => process.env.CHROMIUM ?? '/usr/bin/chromium';

/**
 * Runs study 000 in headless Chromium with `plan` (see rounds.mjs). CPU is
 * read from /proc for Chromium's processes: main = the renderer's main
 * thread, peer = the worker's thread, total = every Chromium process.
 * Resolves to `{ browser: version string, results }`. With `profile` (a file
 * name), the page's main thread is profiled through the DevTools protocol
 * and the profile written there (a .cpuprofile, as node --cpu-prof writes).
 */
export async function run000Browser(plan, { profile } = {}) {
  const server = await startServer(tsRoot);
  const browser = await chromium.launch({ executablePath: chromiumPath(), headless: true, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('console', (m) => (m.type() === 'error' ? errors.push(m.text()) : progress(`000 chromium: ${m.text()}`)));
    page.on('pageerror', (e) => errors.push(e.message));
    let start = null;
    await page.exposeFunction('cpuMark', (what) => {
      if (what === 'start') {
        start = chromiumThreads();
        return null;
      }
      return cpuSince(start, chromiumThreads());
    });
    await page.goto(`${server.url}/bench/000/page.html`);
    await page.waitForFunction(() => window.benchReady === true);
    const cdp = profile ? await page.context().newCDPSession(page) : null;
    if (cdp) {
      await cdp.send('Profiler.enable');
      await cdp.send('Profiler.start');
    }
    const results = await page.evaluate((p) => window.run000(p), plan);
    if (cdp) writeFileSync(profile, JSON.stringify((await cdp.send('Profiler.stop')).profile));
    if (errors.length) throw new Error(`errors in the page: ${errors.join('; ')}`);
    return { browser: `Chromium ${browser.version()}`, results };
  } finally {
    await browser.close();
    await server.close();
  }
}

/** CPU seconds between two chromiumThreads() snapshots, split as described above. */
function cpuSince(before, after) {
  if (!before || !after) return { main: null, peer: null, total: null };
  // The page's renderer is the one running the worker; its main thread has tid = pid.
  const pageRenderers = new Set([...after.values()].filter((t) => t.renderer && /DedicatedWorker/.test(t.name)).map((t) => t.pid));
  let main = 0;
  let peer = 0;
  let total = 0;
  for (const [key, t] of after) {
    const d = (t.ns - (before.get(key)?.ns ?? 0)) / 1e9;
    total += d;
    if (!pageRenderers.has(t.pid)) continue;
    if (t.tid === t.pid) main += d;
    else if (/DedicatedWorker/.test(t.name)) peer += d;
  }
  return { main, peer, total };
}
