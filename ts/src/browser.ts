/**
 * hubwire for browsers (and any JavaScript runtime): everything but the
 * Node transports. Imports no Node module.
 */

export { CODES, codeName, type CodeName } from "./codes.js";
export { HubwireError, Failure, fail } from "./errors.js";
export { Connection, SDK_VERSION, type ConnectionOptions } from "./connection.js";
export { Provider, type Answer, type Outputs, type MethodOptions } from "./provider.js";
export type { CallContext } from "./context.js";
export type { Service, Incoming, Payload, Outcome as ServiceOutcome } from "./engine/serve.js";
export { ItemStream, ItemSink } from "./stream.js";
export { ClientStream, BidiStream, type CallOptions } from "./client.js";
export { method, type MethodDef, type Outcome, type MethodSpec } from "./typed.js";
export { encode, decode, encodeMsgpack, decodeMsgpack, encodeJson, decodeJson } from "./codec.js";
export { Codec, type CodecName, Decoder, decodeFrame, encodeFrame, type Frame, type FrameVisitor } from "./frame.js";
export { negotiate, parseHello, encodeHello, fitHello, HELLO_LIMIT, KIND, KINDS, streamsIn, streamsOut, type Hello, type PeerInfo, type MethodInfo, type Kind } from "./hello.js";
export type { Transport, TransportSink, Listener, OnTransport } from "./transport/index.js";
export * as memory from "./transport/memory.js";
export * as messageport from "./transport/messageport.js";
export * as sharedmemory from "./transport/sharedmemory.js";
export * as websocket from "./transport/websocket.js";
/** Test support: `testing.pair(service, options?)`, a service and a client over the in-memory transport. */
export * as testing from "./testing.js";
