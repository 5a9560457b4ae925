// Study 000's tables, in the shape of the study (ms/op per environment, (B)
// vs (A)), with hubwire's columns and the parallel case beside them.
import { table, msPerOp, int, us, ratio, pct } from '../lib/format.mjs';
import { VARIANTS } from './variants.mjs';

const byId = (id) => VARIANTS.find((v) => v.id === id);
const labelOf = (id) => byId(id).label;

/**
 * `runs`: [{ env: 'Node v20…' | 'Chromium …', results: { [variant]: … } }].
 * Returns `{ markdown, targets }`.
 */
export function report000(runs, plan) {
  const IDS = VARIANTS.map((v) => v.id).filter((id) => runs.some((run) => run.results[id]));
  const header = (extra) => ['Environment', ...IDS.map(labelOf), ...extra];
  const vsA = (run, id, pick) => pick(run.results[id]) / pick(run.results.A);
  const seqRows = runs.map((run) => [
    run.env,
    ...IDS.map((id) => msPerOp(run.results[id].sequential.usPerCall)),
    ...IDS.slice(1).map((id) => pct(vsA(run, id, (r) => r.sequential.usPerCall))),
  ]);
  const parRows = runs.map((run) => [
    run.env,
    ...IDS.map((id) => `${int(run.results[id].parallel.callsPerSec)} calls/s`),
    ...IDS.slice(1).map((id) => pct(vsA(run, id, (r) => r.parallel.callsPerSec))),
  ]);
  const cpuCell = (c) => (c.totalUsPerCall === null ? '–' : `${us(c.mainUsPerCall)} + ${us(c.peerUsPerCall)} (${us(c.totalUsPerCall)})`);
  const cpuRows = runs.flatMap((run) => [
    [run.env, 'sequential', ...IDS.map((id) => cpuCell(run.results[id].sequential.cpu))],
    [run.env, `${plan.inFlight} in flight`, ...IDS.map((id) => cpuCell(run.results[id].parallel.cpu))],
  ]);
  const vsHeads = IDS.slice(1).map((id) => `${byId(id).short} vs. (A)`);

  const targets = runs.flatMap((run) => {
    const seq = vsA(run, 'hubwire', (r) => r.sequential.usPerCall);
    const par = vsA(run, 'hubwire', (r) => r.parallel.callsPerSec);
    return [
      {
        study: '000',
        target: `${run.env}: hubwire per sequential call ≤ 1.2× method A`,
        measured: `${us(run.results.hubwire.sequential.usPerCall)} µs vs ${us(run.results.A.sequential.usPerCall)} µs = ${ratio(seq)}`,
        ratio: seq,
        met: seq <= 1.2,
      },
      {
        study: '000',
        target: `${run.env}: hubwire rate with ${plan.inFlight} in flight ≥ method A's`,
        measured: `${int(run.results.hubwire.parallel.callsPerSec)}/s vs ${int(run.results.A.parallel.callsPerSec)}/s = ${ratio(par)}`,
        ratio: par,
        met: par >= 1,
      },
    ];
  });

  const markdown = [
    `**Sequential** (every request \`await\`s its response), ${int(plan.seqCalls)} calls per variant in ${plan.rounds} alternating rounds:`,
    '',
    table(header(vsHeads), seqRows),
    '',
    `**In parallel** (${int(plan.inFlight)} calls in flight, each answer starts the next), ${int(plan.parCalls)} calls per variant:`,
    '',
    table(header(vsHeads), parRows),
    '',
    'Percentages compare with (A) in the same environment (sequential: time per call, lower is better; parallel: calls per second, higher is better).',
    '',
    '**CPU per call**, µs: main thread + worker thread (all threads of the process or browser). CPU above the wall time per call means both sides were busy at once:',
    '',
    table(['Environment', 'pattern', ...IDS.map(labelOf)], cpuRows),
  ].join('\n');
  return { markdown, targets };
}
