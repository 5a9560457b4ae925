// hubwire in study 001: an echo provider in a worker thread (the MessagePort
// transport, or the shared-memory one) or in a child process (the child
// transport: a socketpair on fd 3), and the main side's round trip with
// each codec.
import { once } from 'node:events';
import { Worker, MessageChannel } from 'node:worker_threads';
import { loadHubwire } from '../lib/hubwire.mjs';

/** A provider with `echo` (values), `echo_raw` (bytes) and `served` (echo calls answered so far). */
function echoProvider(hubwire) {
  let served = 0;
  return new hubwire.Provider('bench-001')
    .unary('echo', (value) => {
      served++;
      return value;
    })
    .unary(
      'echo_raw',
      (bytes) => {
        served++;
        return bytes;
      },
      { raw: true },
    )
    .unary('served', () => served);
}

/** Worker side: serves the echo provider on `port`, or in shared memory over `sab` (does not wait for the main thread to dial). */
export async function serveEcho({ port, sab }) {
  const hubwire = await loadHubwire();
  echoProvider(hubwire)
    .serveTransport(sab ? hubwire.sharedmemory.connect(sab, 'acceptor') : hubwire.messageport.connect(port))
    .catch((err) => console.error(`hubwire echo provider: ${err.message}`));
}

/** Child side: serves the echo provider on the descriptor the parent passed, until the parent hangs up. */
export async function serveEchoInChild() {
  const hubwire = await loadHubwire();
  await hubwire.child.serveChild(echoProvider(hubwire));
}

/** The round trip for `codec`: raw bytes through `echo_raw`, values through `echo`. */
function roundTripFor(conn, codec) {
  return codec === 'raw' ? (bytes) => conn.callRaw('echo_raw', bytes) : (msg) => conn.call('echo', msg, { codec });
}

/**
 * A worker thread serving hubwire echo on a MessagePort (or, with `shm`, on
 * the SDK's shared-memory transport). Resolves to `{ roundTrip, served(), stop() }`.
 */
export async function startHubwireThread(codec, { shm = false } = {}) {
  const hubwire = await loadHubwire();
  const { port1, port2 } = new MessageChannel();
  const sab = shm ? hubwire.sharedmemory.buffer() : undefined;
  const worker = new Worker(new URL('./thread-peer.mjs', import.meta.url), {
    workerData: { mode: 'hubwire', port: port2, sab },
    transferList: [port2],
  });
  await once(worker, 'message');
  const transport = shm ? hubwire.sharedmemory.connect(sab, 'dialer', { watch: worker }) : hubwire.messageport.connect(port1);
  const conn = await hubwire.Connection.dial(transport, { name: 'bench-001' });
  return {
    roundTrip: roundTripFor(conn, codec),
    served: () => conn.call('served', null),
    stop: async () => {
      conn.close();
      port1.close();
      await worker.terminate();
    },
  };
}

/** A child process serving hubwire echo over the child transport. Resolves to `{ roundTrip, pid, served(), stop() }`. */
export async function startHubwireChild(codec) {
  const hubwire = await loadHubwire();
  const childPeer = new URL('./child-peer.mjs', import.meta.url).pathname;
  const transport = hubwire.child.spawn(process.execPath, [childPeer, 'hubwire'], {
    onLog: (line) => process.stderr.write(`[child] ${line}\n`),
  });
  const conn = await hubwire.Connection.dial(transport, { name: 'bench-001' });
  return {
    roundTrip: roundTripFor(conn, codec),
    pid: transport.process.pid,
    served: () => conn.call('served', null),
    stop: async () => {
      // Closing the connection ends the child's serveChild, and so the child.
      const proc = transport.process;
      const exited = proc.exitCode !== null || proc.signalCode !== null ? null : once(proc, 'exit');
      conn.close();
      // A child that outlives its connection is a bug: catch the hang, not wait forever.
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      if (proc.signalCode === 'SIGKILL') throw new Error('the hubwire child did not exit within 10 s of its connection closing');
    },
  };
}
