#!/usr/bin/env node
// The TypeScript bench: studies 000, 001 and 002 (summarised in
// docs/studies.md) reproduced with hubwire beside their baselines, measured
// in the same run.
//
//   node ts/bench/run.mjs [--quick] [--study 000|001|002]… [--json FILE]
//                         [--secs N] [--no-browser] [--no-readme]
//
// Progress goes to stderr, markdown tables to stdout, every figure to the
// JSON file (default bench/results/ts-bench.json), and a full run (not
// --quick) rewrites the results of the studies it ran in ts/bench/README.md.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { machineInfo, watchForeignCpu } from './lib/machine.mjs';
import { runLine, table } from './lib/format.mjs';
import { rewriteReadme } from './lib/readme.mjs';
import { progress } from './lib/progress.mjs';
import { STUDIES } from './studies.mjs';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    study: { type: 'string', multiple: true },
    json: { type: 'string' },
    secs: { type: 'string' },
    'no-browser': { type: 'boolean', default: false },
    'no-readme': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  process.stdout.write(
    'usage: node ts/bench/run.mjs [--quick] [--study 000|001|002]... [--json FILE] [--secs RUN_SECS] [--no-browser] [--no-readme]\n',
  );
  process.exit(0);
}

const mode = args.quick ? 'quick' : 'full';
const selected = (args.study ?? Object.keys(STUDIES)).flatMap((s) => s.split(','));
for (const s of selected) if (!STUDIES[s]) throw new Error(`unknown study ${s} (have ${Object.keys(STUDIES).join(', ')})`);
const options = { quick: args.quick, secs: args.secs === undefined ? undefined : Number(args.secs), browser: !args['no-browser'] };

const machine = machineInfo();
const out = { machine, mode, studies: {} };
const sections = {};
let failed = false;
for (const id of selected) {
  const study = STUDIES[id];
  const plan = study.plan(options);
  progress(`study ${id}: ${study.title} (${mode})`);
  const stopWatch = watchForeignCpu();
  try {
    const { results, markdown, targets } = await study.run(plan, options);
    const foreignCpuPct = stopWatch();
    out.studies[id] = { title: study.title, plan, foreignCpuPct, results, targets };
    sections[id] = [
      `### ${id} — ${study.title}`,
      '',
      runLine(machineInfo(), mode, foreignCpuPct),
      '',
      markdown,
      '',
      `**Targets** (reported, not asserted):`,
      '',
      targetTable(targets),
    ].join('\n');
  } catch (err) {
    failed = true;
    progress(`study ${id} failed: ${err.stack ?? err}`);
    out.studies[id] = { title: study.title, plan, error: String(err.message ?? err) };
    sections[id] = `### ${id} — ${study.title}\n\nFailed: ${err.message ?? err}`;
  }
}

function targetTable(targets) {
  return table(
    ['Target', 'Measured', 'Met'],
    targets.map((t) => [t.target, t.measured, t.met ? 'yes' : `**no**`]),
    ['l', 'l', 'l'],
  );
}

process.stdout.write(`# hubwire TypeScript bench (${mode})\n\n${Object.values(sections).join('\n\n')}\n`);

const jsonPath = args.json ?? fileURLToPath(new URL('../../bench/results/ts-bench.json', import.meta.url));
mkdirSync(dirname(jsonPath), { recursive: true });
writeFileSync(jsonPath, `${JSON.stringify(out, null, 2)}\n`);
progress(`wrote ${jsonPath}`);

if (mode === 'full' && !args['no-readme']) {
  const ok = Object.fromEntries(Object.entries(sections).filter(([id]) => !out.studies[id].error));
  if (Object.keys(ok).length) progress(`rewrote the results of ${Object.keys(ok).join(', ')} in ${rewriteReadme(ok)}`);
}
process.exit(failed ? 1 : 0);
