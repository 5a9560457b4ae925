// The variants of study 000 and how the main thread gets a `call` for each;
// the worker side is in serve.mjs.
import { methodAClient, methodBClient } from './methods.mjs';
import { hubwireEchoClient, HUBWIRE_VARIANTS } from './hubwire-variant.mjs';

/** Every variant, in table order; `id` is what the worker is asked to serve, `short` names it in ratio columns. */
export const VARIANTS = [
  { id: 'A', short: '(A)', label: '(A) one channel, ids in a Map' },
  { id: 'B', short: '(B)', label: '(B) a channel per request' },
  ...HUBWIRE_VARIANTS,
];

/** Returns `{ call, close }` for `variant` over `channel` ({ port, sab? }; `hubwire` is the SDK module, for hubwire variants). */
export async function makeClient(variant, channel, hubwire) {
  if (variant === 'A') return { call: methodAClient(channel.port), close: async () => {} };
  if (variant === 'B') return { call: methodBClient(channel.port), close: async () => {} };
  return hubwireEchoClient(hubwire, variant, channel);
}
