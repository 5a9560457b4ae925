// The worker thread of study 001: echoes every message back, in the way the
// main thread chose in workerData.mode:
//   postMessage  Node's own parentPort.postMessage (the study's baseline)
//   hubwire      a hubwire provider serving `echo` on the port in workerData
//                (or on the shared-memory transport over workerData.sab)
//   ring         the bare SharedArrayBuffer ring prototype (../ring/echo.mjs)
import { parentPort, workerData } from 'node:worker_threads';

const { mode } = workerData;
if (mode === 'postMessage') {
  parentPort.on('message', (msg) => parentPort.postMessage(msg));
} else if (mode === 'hubwire') {
  const { serveEcho } = await import('./hubwire-echo.mjs');
  await serveEcho(workerData);
  parentPort.postMessage('ready');
} else if (mode === 'ring') {
  const { serveRingEcho } = await import('../ring/echo.mjs');
  parentPort.postMessage('ready');
  serveRingEcho(workerData.ring, workerData.spinUs);
} else {
  throw new Error(`unknown mode ${mode}`);
}
