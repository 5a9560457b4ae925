// Node's own echo channels, the baselines of study 001: a worker thread's
// postMessage (structured clone) and a child process's process.send (JSON).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { Worker } from 'node:worker_threads';

const threadPeer = new URL('./thread-peer.mjs', import.meta.url);
const childPeer = new URL('./child-peer.mjs', import.meta.url);

/** Turns an emitter of replies into a one-at-a-time round trip: `send(msg)` then await the next 'message'. */
function roundTripOver(emitter, send) {
  let settle = null;
  emitter.on('message', (reply) => {
    const s = settle;
    settle = null;
    s(reply);
  });
  return (msg) =>
    new Promise((resolve) => {
      settle = resolve;
      send(msg);
    });
}

/** A worker thread echoing with parentPort.postMessage. Resolves to `{ roundTrip(msg), stop() }`. */
export async function startPostMessage() {
  const worker = new Worker(threadPeer, { workerData: { mode: 'postMessage' } });
  await once(worker, 'online');
  return {
    roundTrip: roundTripOver(worker, (msg) => worker.postMessage(msg)),
    stop: () => worker.terminate(),
  };
}

/** A child process echoing with process.send, JSON serialization as in the study. Resolves to `{ roundTrip(msg), pid, stop() }`. */
export async function startProcessSend() {
  const child = fork(childPeer, ['process.send'], { serialization: 'json', stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  await once(child, 'spawn');
  return {
    roundTrip: roundTripOver(child, (msg) => child.send(msg)),
    pid: child.pid,
    stop: async () => {
      const exited = child.exitCode !== null || child.signalCode !== null;
      if (!exited) {
        child.kill();
        await once(child, 'exit');
      }
    },
  };
}
