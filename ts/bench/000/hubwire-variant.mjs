// hubwire in study 000: the worker serves `echo` with a hubwire Provider,
// and the main thread calls it through a Connection, over the SDK's
// MessagePort transport on the channel's port, or over its shared-memory
// transport on the channel's SharedArrayBuffer. Takes the SDK module as an
// argument so that Node (its Node build) and the browser (its browser
// build) share this code.

/** The hubwire variants of study 000, in table order; `shm` ones need a SharedArrayBuffer in the channel. */
export const HUBWIRE_VARIANTS = [
  { id: 'hubwire', short: 'hubwire', label: 'hubwire (MessagePort, msgpack)' },
  { id: 'hubwire-raw', short: 'hubwire raw', label: 'hubwire raw (MessagePort, bytes)' },
  { id: 'hubwire-shm', short: 'hubwire shm', label: 'hubwire (shared memory, msgpack)', shm: true },
];

const isShm = (variant) => HUBWIRE_VARIANTS.find((v) => v.id === variant)?.shm === true;

/** The transport of `side` ('dialer' or 'acceptor') for `variant` over `channel` ({ port, sab }). */
function transportOf(hubwire, variant, channel, side) {
  return isShm(variant) ? hubwire.sharedmemory.connect(channel.sab, side) : hubwire.messageport.connect(channel.port);
}

/**
 * Serves on `channel`: `echo` (values, any codec), `echo_raw` (bytes) and
 * `served` (how many echo calls this provider answered, so a test can check
 * the calls really went through hubwire). Does not wait for the handshake:
 * the main thread dials only after the worker says it is ready.
 */
export function serveHubwireEcho(hubwire, variant, channel) {
  let served = 0;
  const provider = new hubwire.Provider(`bench-000-${variant}`)
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
  provider.serveTransport(transportOf(hubwire, variant, channel, 'acceptor')).catch((err) => console.error(`hubwire provider (${variant}): ${err.message}`));
}

/**
 * Dials the worker over `channel` and returns `{ call({n}) → {n}, served(), close() }`.
 * The raw variant carries `n` as 4 bytes, encoded by hand as an
 * application using raw payloads would.
 */
export async function hubwireEchoClient(hubwire, variant, channel) {
  const conn = await hubwire.Connection.dial(transportOf(hubwire, variant, channel, 'dialer'), { name: 'bench-000' });
  const common = { served: () => conn.call('served', null), close: async () => conn.close() };
  if (variant !== 'hubwire-raw') return { ...common, call: (params) => conn.call('echo', params) };
  return {
    ...common,
    call: async ({ n }) => {
      const req = new Uint8Array(4);
      new DataView(req.buffer).setUint32(0, n, true);
      const res = await conn.callRaw('echo_raw', req);
      return { n: new DataView(res.buffer, res.byteOffset, res.byteLength).getUint32(0, true) };
    },
  };
}
