// Progress on stderr, so stdout carries only the markdown tables.
const t0 = performance.now();

/** Writes one progress line to stderr, prefixed with the seconds since the bench started. */
export function progress(message) {
  process.stderr.write(`[${((performance.now() - t0) / 1e3).toFixed(1).padStart(6)} s] ${message}\n`);
}
