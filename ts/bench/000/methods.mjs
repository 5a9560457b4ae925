// The two hand-written ways of study 000 to make a request/response call
// over a MessageChannel. Written against the port surface that Node's
// worker_threads MessagePort and the browser's MessagePort share
// (postMessage, onmessage with event.data), so Node and Chromium run the
// very same code.

/**
 * Method A, client side: one long-lived port; each request gets a numeric id
 * and its promise callbacks wait in a Map until the response with that id.
 * Returns `call(params) => Promise<result>`.
 */
export function methodAClient(port) {
  const pending = new Map();
  let nextId = 0;
  port.onmessage = (event) => {
    const { id, result, error } = event.data;
    const settle = pending.get(id);
    pending.delete(id);
    if (error === undefined) settle.resolve(result);
    else settle.reject(new Error(error));
  };
  return (params) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, { resolve, reject });
      port.postMessage({ id, params });
    });
}

/** Method A, server side: answers each `{id, params}` with `{id, result}` (or `{id, error}`). */
export function methodAServer(port, handler) {
  port.onmessage = (event) => {
    const { id, params } = event.data;
    try {
      port.postMessage({ id, result: handler(params) });
    } catch (err) {
      port.postMessage({ id, error: String(err) });
    }
  };
}

/**
 * Method B, client side: every request creates a new MessageChannel and
 * transfers one end with the request; the response comes back on the other
 * end, so no ids are needed. Returns `call(params) => Promise<result>`.
 */
export function methodBClient(port) {
  return (params) =>
    new Promise((resolve, reject) => {
      const { port1, port2 } = new MessageChannel();
      port1.onmessage = (event) => {
        port1.close();
        const { result, error } = event.data;
        if (error === undefined) resolve(result);
        else reject(new Error(error));
      };
      port.postMessage({ params, reply: port2 }, [port2]);
    });
}

/** Method B, server side: answers on the port that came with the request, then closes it. */
export function methodBServer(port, handler) {
  port.onmessage = (event) => {
    const { params, reply } = event.data;
    try {
      reply.postMessage({ result: handler(params) });
    } catch (err) {
      reply.postMessage({ error: String(err) });
    }
    reply.close();
  };
}

/** The method every variant serves: echo its argument (study 000 measures the round trip, not work). */
export const echo = (params) => params;
