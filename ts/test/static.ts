/**
 * The browser tests' web server: serves ts/ read-only on 127.0.0.1, port 0.
 * Bare imports are rewritten the way a bundler or an import map would
 * (import maps do not reach into workers): `hubwire` to the browser entry,
 * `msgpackr` to its ES module.
 */

import { readFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { extname, join, normalize } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../", import.meta.url)); // ts/
const TYPES: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".map": "application/json" };

/** Starts the server; `/` is `index` (a path under ts/). Resolves with its URL (`http://127.0.0.1:PORT/`). */
export function serve(index: string): Promise<{ server: Server; url: string; port: number }> {
  const server = createServer(async (req, res) => {
    const path = normalize(decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname));
    const file = join(ROOT, path === "/" ? index : path);
    if (!file.startsWith(ROOT)) return void res.writeHead(403).end();
    try {
      let body: string | Buffer = await readFile(file);
      if (extname(file) === ".js") {
        body = body
          .toString("utf8")
          .replace(/from "hubwire"/g, 'from "/dist/src/browser.js"')
          .replace(/from "msgpackr"/g, 'from "/node_modules/msgpackr/index.js"');
      }
      res
        .writeHead(200, {
          "content-type": TYPES[extname(file)] ?? "application/octet-stream",
          // Cross-origin isolation, so the page may use SharedArrayBuffer.
          "cross-origin-opener-policy": "same-origin",
          "cross-origin-embedder-policy": "require-corp",
        })
        .end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  return new Promise((resolve) =>
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      resolve({ server, url: `http://127.0.0.1:${port}/`, port });
    }),
  );
}
