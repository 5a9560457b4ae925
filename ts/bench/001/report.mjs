// Study 001's tables: the study's own summary (process vs thread, messages
// processed in RUN_SECS), then each side with hubwire's codecs beside Node's
// channel, and the CPU each kept busy.
import { table, int, ratio, pct, cores } from '../lib/format.mjs';
import { VARIANTS } from './study.mjs';

const kb = (bytes) => (bytes < 100 ? (bytes / 1000).toFixed(3) : bytes < 10_000 ? (bytes / 1000).toFixed(1) : (bytes / 1000).toFixed(0));

/** `r`: run001's result plus `secs`. Returns `{ markdown, targets }`. */
export function report001(r) {
  const sizes = Object.keys(r.sizes);
  const get = (size, id) => r.sizes[size].variants[id];
  const has = (id) => sizes.some((s) => get(s, id));
  const summary = table(
    ['Message size', 'kb', 'process', 'thread', '%'],
    sizes.map((s) => {
      const p = get(s, 'child/process.send');
      const t = get(s, 'thread/postMessage');
      return [s, kb(r.sizes[s].jsonBytes), int(p?.count), int(t?.count), p && t ? pct(t.count / p.count) : '–'];
    }),
  );
  const side = (name) => {
    const vs = VARIANTS.filter((v) => v.side === name && has(v.id));
    const base = vs.find((v) => v.baseline);
    return table(
      ['Message size', 'kb', ...vs.map((v) => v.label)],
      sizes.map((s) => [
        s,
        kb(r.sizes[s].jsonBytes),
        ...vs.map((v) => {
          const x = get(s, v.id);
          if (!x) return '–';
          const b = base && get(s, base.id);
          return v === base || !b ? `${int(x.perSec)}/s` : `${int(x.perSec)}/s (${ratio(x.perSec / b.perSec)})`;
        }),
      ]),
    );
  };
  const present = VARIANTS.filter((v) => has(v.id));
  const cpu = table(
    ['Message size', ...present.map((v) => `${v.side}: ${v.label}`)],
    sizes.map((s) => [s, ...present.map((v) => (get(s, v.id) ? `${cores(get(s, v.id).cpu.mainCores)} + ${cores(get(s, v.id).cpu.peerCores)}` : '–'))]),
  );

  const targets = [];
  for (const v of VARIANTS.filter((x) => x.id.includes('/hubwire') && has(x.id))) {
    const baseId = v.side === 'thread' ? 'thread/postMessage' : 'child/process.send';
    const ratios = sizes.map((s) => ({ s, x: get(s, v.id) && get(s, baseId) ? get(s, v.id).perSec / get(s, baseId).perSec : null }));
    const need = (s) => (v.side === 'child' || s === 'small' || s === 'medium' ? 2 : 1);
    const missed = ratios.filter(({ s, x }) => x === null || x < need(s));
    targets.push({
      study: '001',
      target: `${v.side === 'thread' ? 'worker thread' : 'child process'}, ${v.label}: ≥ ${v.side === 'thread' ? "postMessage's rate (≥ 2× for small, medium)" : '2× process.send'} at every size`,
      measured: ratios.map(({ s, x }) => `${s} ${ratio(x)}`).join(', '),
      ratio: Math.min(...ratios.map(({ s, x }) => (x ?? 0) / need(s))),
      met: missed.length === 0,
    });
  }

  const markdown = [
    `**Summary — ${r.secs} s runs** (the study's table: messages echoed in RUN_SECS by Node's own channels; process = \`process.send\` with JSON serialization, thread = \`postMessage\`):`,
    '',
    summary,
    '',
    `**Worker thread**, round trips per second (ratio to \`postMessage\` in the same run):`,
    '',
    side('thread'),
    '',
    `**Child process**, round trips per second (ratio to \`process.send\` in the same run):`,
    '',
    side('child'),
    '',
    'The raw codec and the ring carry the message\'s JSON bytes, encoded once before the loop (an application that already holds bytes); msgpack and json encode and decode the object on every hop, as postMessage clones it and process.send serializes it.',
    '',
    '**CPU**, cores kept busy on average: main thread + peer (the worker thread with its helper threads, or the child process):',
    '',
    cpu,
  ].join('\n');
  return { markdown, targets };
}
