/** Byte helpers shared by the reader, the writer and the transports. */

/** `chunks` joined into one new buffer (`total`: their summed length, when known). */
export function concat(chunks: readonly Uint8Array[], total = -1): Uint8Array {
  if (total < 0) {
    total = 0;
    for (const c of chunks) total += c.length;
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}
