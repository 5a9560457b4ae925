// Study 000 in Node: the main thread calls a worker_thread over a
// MessageChannel with method A, method B and hubwire.
import { once } from 'node:events';
import { Worker, MessageChannel } from 'node:worker_threads';
import { runRounds } from './rounds.mjs';
import { withCpu } from '../lib/measure.mjs';
import { loadHubwire } from '../lib/hubwire.mjs';
import { progress } from '../lib/progress.mjs';

/** Runs study 000 in Node with `plan` (see rounds.mjs); CPU is the main thread's and the worker's. */
export async function run000Node(plan) {
  const worker = new Worker(new URL('./node-worker.mjs', import.meta.url));
  try {
    return await runRounds(plan, {
      async openChannel(variant, hubwire) {
        const { port1, port2 } = new MessageChannel();
        const sab = variant.shm ? hubwire.sharedmemory.buffer() : undefined;
        worker.postMessage({ variant: variant.id, channel: { port: port2, sab } }, [port2]);
        const [ready] = await once(worker, 'message');
        if (ready.ready !== variant.id) throw new Error(`worker answered ${JSON.stringify(ready)}`);
        return { port: port1, sab };
      },
      loadHubwire,
      measure: (body) => withCpu(body),
      progress: (text) => progress(`000 node: ${text}`),
    });
  } finally {
    await worker.terminate();
  }
}
