// A tiny static HTTP server for the browser runs: serves the ts/ directory on
// 127.0.0.1 so a page can load the bench modules, the SDK's browser build and
// its dependencies from ts/node_modules. Browsers cannot resolve bare import
// specifiers ("msgpackr") and import maps do not reach into workers, so
// JavaScript is served with bare specifiers rewritten to node_modules paths.
// The page is cross-origin isolated (COOP/COEP), so SharedArrayBuffer works.
import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
};

/** Picks the browser entry of an `exports` value: a path, or nested conditions. */
function pickCondition(value) {
  if (typeof value === 'string') return value;
  if (value === null || typeof value !== 'object') return null;
  for (const key of ['browser', 'import', 'default']) {
    if (key in value) {
      const found = pickCondition(value[key]);
      if (found) return found;
    }
  }
  return null;
}

/** Resolves a bare specifier to a URL path (under /node_modules, or the served package itself), as a bundler targeting browsers would. */
async function resolveBare(root, specifier) {
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  const sub = specifier.slice(name.length);
  // The package served (hubwire) refers to itself by name, like Node's self-reference.
  const own = JSON.parse(await readFile(join(root, 'package.json'), 'utf8'));
  const dir = own.name === name ? '' : `/node_modules/${name}`;
  const pkg = own.name === name ? own : JSON.parse(await readFile(join(root, dir, 'package.json'), 'utf8'));
  let entry = null;
  if (pkg.exports) {
    const exp = typeof pkg.exports === 'string' || !Object.keys(pkg.exports).some((k) => k.startsWith('.')) ? { '.': pkg.exports } : pkg.exports;
    entry = pickCondition(exp[`.${sub}`]);
  }
  entry ??= sub ? `.${sub}` : pkg.browser && typeof pkg.browser === 'string' ? pkg.browser : (pkg.module ?? pkg.main ?? 'index.js');
  return `${dir}/${entry.replace(/^\.\//, '')}`;
}

const BARE = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"./][^'"]*)\2/g;

async function rewriteImports(root, source) {
  const specifiers = new Set([...source.matchAll(BARE)].map((m) => m[3]));
  const resolved = new Map();
  for (const s of specifiers) resolved.set(s, await resolveBare(root, s));
  return source.replace(BARE, (_, lead, quote, s) => `${lead}${quote}${resolved.get(s)}${quote}`);
}

/** Serves `root` on an ephemeral port of 127.0.0.1. Resolves to `{ url, close() }`. */
export async function startServer(root) {
  const server = createServer(async (req, res) => {
    const path = normalize(join(root, decodeURIComponent(new URL(req.url, 'http://x').pathname)));
    if (!path.startsWith(root + sep)) {
      res.writeHead(403).end();
      return;
    }
    try {
      let body = await readFile(path);
      const type = TYPES[extname(path)] ?? 'application/octet-stream';
      if (type.startsWith('text/javascript')) body = await rewriteImports(root, body.toString('utf8'));
      res.writeHead(200, {
        'content-type': type,
        'cache-control': 'no-store',
        'cross-origin-opener-policy': 'same-origin',
        'cross-origin-embedder-policy': 'require-corp',
      });
      res.end(body);
    } catch (err) {
      res.writeHead(err.code === 'ENOENT' ? 404 : 500, { 'content-type': 'text/plain' }).end(String(err.message));
    }
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}
