// The worker thread of study 000 in Node: each message from the main thread
// brings a channel (a port, and a SharedArrayBuffer for shared-memory variants) and
// the variant to serve on it.
import { parentPort } from 'node:worker_threads';
import { serve } from './serve.mjs';
import { loadHubwire } from '../lib/hubwire.mjs';

parentPort.on('message', async ({ variant, channel }) => {
  const hubwire = variant.startsWith('hubwire') ? await loadHubwire() : null;
  serve(variant, channel, hubwire);
  parentPort.postMessage({ ready: variant });
});
