// Study 002's tables, in the shape of the study's executive summary: each
// approach's cost per call and its overhead, per method kind (query,
// mutation), on each transport.
import { table, us, overhead } from '../lib/format.mjs';
import { APPROACHES, METHODS } from './study.mjs';

const labelOf = (a, transport) => (typeof a.label === 'string' ? a.label : a.label[transport]);

/** `r`: run002's result. Returns `{ markdown, targets }`. */
export function report002(r, plan) {
  const parts = [];
  const targets = [];
  for (const [transport, byMethod] of Object.entries(r)) {
    const methods = Object.keys(byMethod);
    const rows = APPROACHES.map((a) => [
      labelOf(a, transport),
      ...methods.flatMap((m) => {
        const x = byMethod[m][a.id];
        const raw = byMethod[m].raw;
        const hand = byMethod[m].hand;
        return [
          `${us(x.usPerCall)} µs`,
          a.id === 'raw' ? 'baseline' : overhead(x.usPerCall / raw.usPerCall - 1),
          a.id === 'hand' ? 'baseline' : overhead(x.usPerCall / hand.usPerCall - 1),
          `${us(x.cpu.totalUsPerCall)} µs`,
        ];
      }),
    ]);
    const header = [
      'Approach',
      ...methods.flatMap((m) => [`${METHODS[m]} per call`, 'vs raw hubwire', 'vs hand-written', `${METHODS[m]} CPU/call`]),
    ];
    parts.push(`**${transport === 'worker' ? 'Worker thread (MessagePort)' : 'In memory (same thread)'}**:`, '', table(header, rows), '');
    for (const m of methods) {
      const typed = byMethod[m].typed.usPerCall;
      const raw = byMethod[m].raw.usPerCall;
      targets.push({
        study: '002',
        target: `${transport}, ${METHODS[m]}: typed layer with validation ≤ 5% over a raw hubwire call`,
        measured: `${us(typed)} µs vs ${us(raw)} µs = ${overhead(typed / raw - 1)}`,
        ratio: typed / raw,
        met: typed / raw <= 1.05,
      });
    }
  }
  parts.push(
    `${plan.calls.toLocaleString('en-US')} sequential calls per approach and method, in ${plan.rounds} alternating rounds. The query reads a user by id; the mutation creates one (its input has an e-mail address, which zod checks with a regular expression). CPU is the main thread plus the worker's.`,
  );
  return { markdown: parts.join('\n'), targets };
}
