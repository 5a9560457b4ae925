// The worker side of study 000, shared by the Node worker thread and the
// browser's Web Worker: serve the echo method on a port with the variant the
// main thread asks for.
import { methodAServer, methodBServer, echo } from './methods.mjs';
import { serveHubwireEcho } from './hubwire-variant.mjs';

/**
 * Serves `echo` on `channel` ({ port, sab? }: a MessagePort, and for
 * shared-memory variants a SharedArrayBuffer) in the way `variant` names ('A', 'B', or a
 * hubwire variant); `hubwire` is the SDK module for this environment (Node
 * or browser build). The server is ready when this returns.
 */
export function serve(variant, channel, hubwire) {
  if (variant === 'A') methodAServer(channel.port, echo);
  else if (variant === 'B') methodBServer(channel.port, echo);
  else serveHubwireEcho(hubwire, variant, channel);
}
