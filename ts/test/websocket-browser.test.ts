/**
 * The WebSocket transport in a real browser against a real hub: headless
 * Chromium (Debian's `chromium`, driven by playwright-core) loads a page
 * from a local server; the page dials `hubwire hub` over its WebSocket
 * listener and calls the Rust provider behind it. The same page loaded
 * from an origin the hub does not list must be refused at the upgrade.
 */

import assert from "node:assert/strict";
import type { Server } from "node:http";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser } from "playwright-core";
import { startHub, type RunningHub } from "./hub.js";
import { serve } from "./static.js";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

type Result = { name: string; ok: boolean; error?: string };

describe("browser: a page calls a Rust provider through the hub over a WebSocket (headless Chromium)", { timeout: 90_000 }, () => {
  let browser: Browser;
  let server: Server;
  let hub: RunningHub;
  let results: Result[] = [];
  let refused: Result[] = [];

  /** Loads the page from `origin` and returns what it reported. */
  async function run(origin: string, query: string): Promise<Result[]> {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${origin}/test/browser/websocket.html?hub=${encodeURIComponent(hub.url)}${query}`);
    await page.waitForFunction(() => (globalThis as { hubwireResults?: unknown }).hubwireResults !== undefined, null, { timeout: 60_000 });
    const r = (await page.evaluate(() => (globalThis as { hubwireResults?: Result[] }).hubwireResults)) ?? [];
    assert.deepEqual(errors, [], "no uncaught errors in the page");
    await page.close();
    return r;
  }

  before(async () => {
    const s = await serve("test/browser/websocket.html");
    server = s.server;
    // Only the page's origin on 127.0.0.1 is allowed; the same server as localhost is another origin.
    hub = await startHub(`allowed_origins = ["http://127.0.0.1:${s.port}"]`);
    browser = await chromium.launch({ executablePath: CHROMIUM, args: FLAGS });
    results = await run(`http://127.0.0.1:${s.port}`, "");
    refused = await run(`http://localhost:${s.port}`, "&expect=refused");
  });

  after(async () => {
    await browser?.close();
    server?.close();
    await hub?.stop();
  });

  it("ran every check", () => {
    assert.deepEqual(results.map((r) => r.name), NAMES, JSON.stringify(results));
  });

  const NAMES = ["raw echo, small and 3 MiB", "server stream", "bidi stream", "the hub's own status method", "200 concurrent calls"];
  for (const name of NAMES) {
    it(name, () => {
      const r = results.find((x) => x.name === name);
      assert.ok(r, `the page did not report "${name}"`);
      assert.ok(r.ok, r.error);
    });
  }

  it("a page from an origin not in allowed_origins is refused", () => {
    assert.equal(refused.length, 1, JSON.stringify(refused));
    assert.ok(refused[0]!.ok, refused[0]!.error);
    assert.match(hub.log(), /Origin Some\("http:\/\/localhost:\d+"\) is not allowed/);
  });
});
