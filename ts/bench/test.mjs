#!/usr/bin/env node
// Smoke test of the bench (make test-ts-bench): every study runs with tiny
// counts; each check asserts that a variant produced numbers, that every
// echo came back right, and that the hubwire rows went through hubwire (its
// provider answered exactly the calls the client made; the typed layer with
// validation on refuses what it should). Times nothing. Ends with
// "ts-bench: N passed, N failed".
import { run000Node } from './000/node.mjs';
import { run000Browser } from './000/browser.mjs';
import { report000 } from './000/report.mjs';
import { run001 } from './001/study.mjs';
import { report001 } from './001/report.mjs';
import { run002 } from './002/study.mjs';
import { report002 } from './002/report.mjs';
import { declarations, provider } from './002/api.mjs';
import { loadHubwire } from './lib/hubwire.mjs';

// Catches a hang (a peer that never answers), never a slow run.
setTimeout(() => {
  process.stdout.write(`not ok - the smoke test hung (still running after 5 min)\nts-bench: ${passed} passed, ${failed + 1} failed\n`);
  process.exit(1);
}, 300_000).unref();

let passed = 0;
let failed = 0;
function check(name, ok, detail = '') {
  if (ok) passed++;
  else failed++;
  process.stdout.write(`${ok ? 'ok' : 'not ok'} - ${name}${ok || !detail ? '' : ` (${detail})`}\n`);
}
async function step(name, body) {
  try {
    await body();
  } catch (err) {
    check(name, false, err.stack ?? String(err));
  }
}
const positive = (x) => typeof x === 'number' && Number.isFinite(x) && x > 0;

function check000(env, results) {
  for (const [id, r] of Object.entries(results)) {
    check(`000 ${env} ${id}: sequential and parallel calls measured`, positive(r.sequential.usPerCall) && positive(r.parallel.callsPerSec));
    check(`000 ${env} ${id}: every answer was the echo of its call`, r.sequential.wrong === 0 && r.parallel.wrong === 0, `${r.sequential.wrong} + ${r.parallel.wrong} wrong`);
    if (id.startsWith('hubwire')) {
      check(`000 ${env} ${id}: the hubwire provider answered every call`, r.provider?.served === r.provider?.sent, JSON.stringify(r.provider));
    }
  }
}

const plan000 = { seqCalls: 200, parCalls: 400, inFlight: 50, warmup: 20, rounds: 1 };
await step('000 node', async () => {
  const results = await run000Node(plan000);
  check000('node', results);
  check('000 report renders', report000([{ env: 'node', results }], plan000).markdown.includes('hubwire'));
});
await step('000 chromium', async () => {
  const { results } = await run000Browser(plan000);
  check000('chromium', results);
});

await step('001', async () => {
  const r = { secs: 0.05, ...(await run001({ secs: 0.05, warmupSecs: 0.02 })) };
  for (const [size, s] of Object.entries(r.sizes)) {
    for (const [id, v] of Object.entries(s.variants)) {
      check(`001 ${size} ${id}: round trips counted`, positive(v.perSec) && v.count > 0);
      check(`001 ${size} ${id}: the echo returned the message sent`, v.wrong === 0, `${v.wrong} wrong`);
      if (id.includes('hubwire')) check(`001 ${size} ${id}: the hubwire provider answered every echo`, v.provider?.served === v.provider?.sent, JSON.stringify(v.provider));
    }
  }
  check('001 report renders', report001(r).markdown.includes('hubwire'));
});

await step('002', async () => {
  const plan = { calls: 100, rounds: 1, warmup: 10 };
  const r = await run002(plan);
  for (const [transport, byMethod] of Object.entries(r)) {
    for (const [method, byApproach] of Object.entries(byMethod)) {
      for (const [approach, x] of Object.entries(byApproach)) {
        check(`002 ${transport} ${method} ${approach}: calls measured, every answer right`, positive(x.usPerCall) && x.wrong === 0, `${x.wrong} wrong`);
      }
    }
  }
  check('002 report renders', report002(r, plan).markdown.includes('typed'));
});

await step('002 validation', async () => {
  // The rows "validation on" and "off" differ in what they check: a bad input
  // is refused with invalid_argument only when validation is on.
  const hubwire = await loadHubwire();
  const decl = declarations(hubwire);
  const dial = async (style) => {
    const [a, b] = hubwire.memory.pair();
    provider(hubwire, style).serveTransport(b);
    return hubwire.Connection.dial(a);
  };
  const typed = await dial('typed');
  const loose = await dial('loose');
  const bad = { name: 'x', email: 'not an e-mail address', tags: [] };
  const code = (p) => p.then(() => 'ok', (e) => e.code ?? String(e));
  check('002 typed, validation on: a bad input is refused with invalid_argument', (await code(decl.typed.createUser.call(typed, bad))) === 'invalid_argument');
  check('002 typed, validation off: the same input reaches the handler', (await code(decl.loose.createUser.call(loose, bad))) === 'ok');
  typed.close();
  loose.close();
});

process.stdout.write(`ts-bench: ${passed} passed, ${failed} failed\n`);
process.exit(failed ? 1 : 0);
