// Study 000 in the browser: the page's main thread calls a module Web Worker
// over a MessageChannel. The Node runner (browser.mjs) calls window.run000.
import { runRounds } from './rounds.mjs';

const worker = new Worker(new URL('./web-worker.mjs', import.meta.url), { type: 'module' });
const replies = [];
let waiting = null;
worker.onmessage = (event) => {
  if (waiting) {
    const w = waiting;
    waiting = null;
    w(event.data);
  } else replies.push(event.data);
};
worker.onerror = (event) => console.error(`worker error: ${event.message}`);
const nextReply = () => (replies.length ? Promise.resolve(replies.shift()) : new Promise((resolve) => (waiting = resolve)));

/** Runs study 000 here with `plan` (see rounds.mjs). Wall time only: CPU is counted by the Node runner. */
window.run000 = (plan) =>
  runRounds(plan, {
    async openChannel(variant, hubwire) {
      const { port1, port2 } = new MessageChannel();
      const sab = variant.shm ? hubwire.sharedmemory.buffer() : undefined;
      worker.postMessage({ variant: variant.id, channel: { port: port2, sab } }, [port2]);
      const ready = await nextReply();
      if (ready.ready !== variant.id) throw new Error(`worker answered ${JSON.stringify(ready)}`);
      return { port: port1, sab };
    },
    loadHubwire: () => import('hubwire/browser'),
    async measure(body) {
      await window.cpuMark('start');
      const t0 = performance.now();
      const r = await body();
      const wall = (performance.now() - t0) / 1e3;
      const cpu = await window.cpuMark('end');
      return { ...r, cpu: { ...cpu, wall } };
    },
    progress: (text) => console.log(text),
  });
window.benchReady = true;
