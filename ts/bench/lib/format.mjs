// Number formats and markdown tables shared by the study reports.

/** A markdown table from a header row and rows of cells; `align` is 'l' or 'r' per column. */
export function table(header, rows, align = header.map((_, i) => (i === 0 ? 'l' : 'r'))) {
  const line = (cells) => `| ${cells.join(' | ')} |`;
  const rule = align.map((a) => (a === 'r' ? '---:' : '---'));
  return [line(header), line(rule), ...rows.map(line)].join('\n');
}

/** 12345.6 → "12,346". */
export const int = (x) => (x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en-US'));

/** Microseconds with three significant digits: 61.2, 4.79, 123. */
export function us(x) {
  if (x === null || x === undefined) return '–';
  return x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2);
}

/** Milliseconds per operation from microseconds, as the study prints them: "0.0612 ms/op". */
export const msPerOp = (microseconds) => `${(microseconds / 1e3).toFixed(4)} ms/op`;

/** A ratio: 1.234 → "1.23×". */
export const ratio = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${x.toFixed(2)}×`);

/** A percentage as the study prints it: 1.06 → "106%". */
export const pct = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${Math.round(x * 100)}%`);

/** A signed overhead: 0.052 → "+5.2%". */
export const overhead = (x) => (x === null || x === undefined || !Number.isFinite(x) ? '–' : `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`);

/** CPU cores busy, to two decimals ("0.82"), or "–" when not measurable here. */
export const cores = (x) => (x === null || x === undefined ? '–' : x.toFixed(2));

/** One line naming the machine and the run, for the head of each study's results. */
export function runLine(machine, mode, foreignCpuPct) {
  const foreign = foreignCpuPct === null ? '' : `; other processes used ${foreignCpuPct}% of the machine's CPU meanwhile`;
  const warning = foreignCpuPct > 10 ? ' **The machine was busy with other work: every figure is distorted, spinning variants most.**' : '';
  const commit = `${machine.commit ?? '?'}${machine.localChanges ? ' with uncommitted changes in ts/' : ''}`;
  return `Measured ${machine.date.slice(0, 16).replace('T', ' ')} UTC at commit ${commit}, ${mode} run: ${machine.cpu}, ${machine.cores} cores, ${machine.kernel}, Node ${machine.node}${foreign}.${warning}`;
}
