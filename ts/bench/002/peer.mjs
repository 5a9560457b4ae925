// The worker thread of study 002: the hand-written server (method A of study
// 000, dispatching on a method name) on one port, and each hubwire provider
// (plain, typed, loose) on a port of its own.
import { parentPort, workerData } from 'node:worker_threads';
import { methodAServer } from '../000/methods.mjs';
import { handlers, provider, STYLES } from './api.mjs';
import { loadHubwire } from '../lib/hubwire.mjs';

const hubwire = await loadHubwire();
methodAServer(workerData.handPort, ({ method, input }) => handlers[method](input));
for (const style of STYLES) {
  provider(hubwire, style)
    .serveTransport(hubwire.messageport.connect(workerData.hubwirePorts[style]))
    .catch((err) => console.error(`hubwire provider (${style}): ${err.message}`));
}
parentPort.postMessage('ready');
