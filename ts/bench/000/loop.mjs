// The two call patterns of study 000, independent of the variant and of the
// environment (Node or a browser page): `call(i)` must resolve to the echo
// of `{ n: i }`.

/**
 * `n` calls one after another, each awaited before the next starts (the
 * study's "single-threaded" case). Returns { calls, secs, usPerCall, wrong }.
 */
export async function sequential(call, n) {
  let wrong = 0;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const r = await call({ n: i });
    if (r?.n !== i) wrong++;
  }
  const secs = (performance.now() - t0) / 1e3;
  return { calls: n, secs, usPerCall: (secs * 1e6) / n, wrong };
}

/**
 * `n` calls with `inFlight` of them outstanding at all times (a sliding
 * window: each answer starts the next call) — the case the study left open.
 * Returns { calls, secs, usPerCall, callsPerSec, wrong }.
 */
export function parallel(call, n, inFlight) {
  return new Promise((resolve, reject) => {
    let started = 0;
    let done = 0;
    let wrong = 0;
    const t0 = performance.now();
    const launch = () => {
      const i = started++;
      call({ n: i }).then((r) => {
        if (r?.n !== i) wrong++;
        if (++done === n) {
          const secs = (performance.now() - t0) / 1e3;
          resolve({ calls: n, secs, usPerCall: (secs * 1e6) / n, callsPerSec: n / secs, wrong });
        } else if (started < n) launch();
      }, reject);
    };
    for (let k = 0; k < Math.min(inFlight, n); k++) launch();
  });
}
