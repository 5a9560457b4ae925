#!/usr/bin/env node
// Summarizes a V8 CPU profile (from `node --cpu-prof`): the functions with
// the most self time, and (with --total) the most inclusive time, as a
// percentage of the profile's samples.
//
//   node ts/bench/tools/cpuprofile-top.mjs FILE.cpuprofile [--top N] [--total]
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, total: { type: 'boolean', default: false } },
});
if (positionals.length !== 1) {
  process.stderr.write('usage: cpuprofile-top.mjs FILE.cpuprofile [--top N] [--total]\n');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(positionals[0], 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

// Samples per node; the time between samples is attributed to the sampled node.
const selfSamples = new Map();
for (const id of profile.samples) selfSamples.set(id, (selfSamples.get(id) ?? 0) + 1);
const total = profile.samples.length;

const nameOf = (n) => {
  const f = n.callFrame;
  const where = f.url ? `${basename(f.url)}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};

const self = new Map();
const inclusive = new Map();
for (const [id, count] of selfSamples) {
  const name = nameOf(nodes.get(id));
  self.set(name, (self.get(name) ?? 0) + count);
  // Inclusive: every distinct function on the stack gets the sample once.
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const nm = nameOf(nodes.get(cur));
    if (seen.has(nm)) continue;
    seen.add(nm);
    inclusive.set(nm, (inclusive.get(nm) ?? 0) + count);
  }
}

const print = (title, map) => {
  process.stdout.write(`${title} (${total} samples, ${((profile.endTime - profile.startTime) / 1e6).toFixed(2)} s)\n`);
  for (const [name, count] of [...map].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
    process.stdout.write(`${((100 * count) / total).toFixed(1).padStart(6)}%  ${name}\n`);
  }
};
print('self time', self);
if (values.total) print('\ninclusive time', inclusive);
