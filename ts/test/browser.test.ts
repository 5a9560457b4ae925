/**
 * The browser transport in a real browser: headless Chromium (Debian's
 * `chromium`, driven by playwright-core) loads a page from a tiny local
 * HTTP server; the page dials a Web Worker over the SDK's MessagePort
 * transport, then another over its shared-memory transport (client in the
 * page, the behaviour provider in the worker), and reports one result per
 * check and transport, each a test here.
 */

import assert from "node:assert/strict";
import type { Server } from "node:http";
import { after, before, describe, it } from "node:test";
import { chromium, type Browser } from "playwright-core";
import { serve } from "./static.js";

const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

type Result = { name: string; ok: boolean; error?: string };

describe("browser: page ⇄ Web Worker over a MessagePort and over shared memory (headless Chromium)", { timeout: 90_000 }, () => {
  let browser: Browser;
  let server: Server;
  let results: Result[] = [];

  before(async () => {
    const s = await serve("test/browser/index.html");
    server = s.server;
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--headless", "--no-sandbox"] });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(s.url);
    await page.waitForFunction(() => (globalThis as { hubwireResults?: unknown }).hubwireResults !== undefined, null, { timeout: 60_000 });
    results = (await page.evaluate(() => (globalThis as { hubwireResults?: Result[] }).hubwireResults)) ?? [];
    assert.deepEqual(errors, [], "no uncaught errors in the page");
  });

  after(async () => {
    await browser?.close();
    server?.close();
  });

  it("ran every check", () => {
    assert.equal(results.length, 2 * NAMES.length, JSON.stringify(results));
  });

  // One test per check the page ran; the names are known up front so each counts.
  const NAMES = [
    "the worker's HELLO lists its methods",
    "raw echo, small and 1 MiB",
    "msgpack and json values",
    "declared failure with its value",
    "a thrown bug is a defect",
    "unknown method",
    "server stream past the window",
    "client stream",
    "bidi stream",
    "the worker calls the page back",
    "cancellation through an AbortSignal reaches the handler",
    "deadline",
    "flow control bounds a fast producer",
    "1000 concurrent calls",
  ];
  for (const transport of ["messageport", "sharedmemory"]) {
    for (const name of NAMES) {
      it(`${transport}: ${name}`, () => {
        const r = results.find((x) => x.name === `${transport}: ${name}`);
        assert.ok(r, `the page did not report "${transport}: ${name}"`);
        assert.ok(r.ok, r.error);
      });
    }
  }
});
