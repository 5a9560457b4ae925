// The Web Worker of study 000 in the browser: each message from the page
// brings a channel and the variant to serve on it (the same serve.mjs as Node's
// worker thread, with the SDK's browser build).
import { serve } from './serve.mjs';

self.onmessage = async (event) => {
  const { variant, channel } = event.data;
  const hubwire = variant.startsWith('hubwire') ? await import('hubwire/browser') : null;
  serve(variant, channel, hubwire);
  self.postMessage({ ready: variant });
};
