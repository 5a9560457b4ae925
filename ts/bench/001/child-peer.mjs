// The child process of study 001: echoes every message back, in the way the
// parent chose in argv[2]:
//   process.send  Node's IPC channel with JSON serialization (the study's baseline)
//   hubwire       a hubwire provider serving `echo` on the descriptor the parent passed
const mode = process.argv[2];
if (mode === 'process.send') {
  process.on('message', (msg) => process.send(msg));
} else if (mode === 'hubwire') {
  const { serveEchoInChild } = await import('./hubwire-echo.mjs');
  await serveEchoInChild();
} else {
  throw new Error(`unknown mode ${mode}`);
}
