/**
 * hubwire for Node: the protocol, the client and provider APIs, the typed
 * layer, and every transport (memory, MessagePort, child process, Unix
 * socket, TCP, TLS, NATS). `hubwire/browser` is the same without the Node
 * transports.
 */

export * from "./browser.js";
export * as child from "./transport/child.js";
export * as unix from "./transport/unix.js";
export * as tcp from "./transport/tcp.js";
export * as tls from "./transport/tls.js";
export * as nats from "./transport/nats.js";
