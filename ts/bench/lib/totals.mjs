// Totals over the rounds of one variant. The bench alternates variants in
// rounds so that a burst of noise on the shared machine hits them all, then
// reports each variant's totals over its rounds. Pure (no Node APIs): the
// browser page of study 000 uses it too.

/** Sums rounds of `{ calls, wrong, cpu: {wall, main, peer, total} }` into one total with per-call figures. */
export function totalOf(rounds) {
  const calls = rounds.reduce((s, r) => s + r.calls, 0);
  const secs = rounds.reduce((s, r) => s + r.cpu.wall, 0);
  const add = (k) => (rounds.every((r) => r.cpu[k] !== null) ? rounds.reduce((s, r) => s + r.cpu[k], 0) : null);
  const perCall = (v) => (v === null ? null : (v * 1e6) / calls);
  const main = add('main');
  const peer = add('peer');
  const total = add('total');
  return {
    calls,
    secs,
    wrong: rounds.reduce((s, r) => s + r.wrong, 0),
    usPerCall: (secs * 1e6) / calls,
    callsPerSec: calls / secs,
    roundsUsPerCall: rounds.map((r) => (r.cpu.wall * 1e6) / r.calls),
    cpu: {
      mainUsPerCall: perCall(main),
      peerUsPerCall: perCall(peer),
      totalUsPerCall: perCall(total),
      // CPU cores kept busy on average: 1.0 is one core fully used.
      mainCores: main === null ? null : main / secs,
      peerCores: peer === null ? null : peer / secs,
      totalCores: total === null ? null : total / secs,
    },
  };
}
