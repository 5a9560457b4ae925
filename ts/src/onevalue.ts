/**
 * What counts as one MessagePack value (`spec/PROTOCOL.md` §6.2): a
 * payload is exactly one value of the data model MessagePack shares with
 * JSON. {@link checkMsgpack} walks the bytes once, before msgpackr sees
 * them, because msgpackr would accept more (ext types, number keys turned
 * into strings, bytes after the value).
 */

const utf8Fatal = new TextDecoder("utf-8", { fatal: true });

/**
 * The deepest nesting of arrays and maps accepted (§6.2 lets a receiver
 * refuse deeper values); it also bounds the walk's stack.
 */
export const MAX_DEPTH = 128;

/**
 * Throws unless `b` is exactly one MessagePack value: nothing after it, not
 * cut short, no ext types (nor the timestamp), no 0xc1, only `str` map keys,
 * valid UTF-8 in every `str`, at most {@link MAX_DEPTH} containers deep.
 * Iterative: `left` and `isMap` are a stack of open containers (a map of n
 * entries counts 2n elements; an even count left means a key is next),
 * with the whole value as its bottom entry.
 */
export function checkMsgpack(b: Uint8Array): void {
  const left: number[] = [1];
  const isMap: boolean[] = [false];
  const n = b.length;
  let i = 0;
  const need = (k: number): number => {
    if (i + k > n) throw new Error("the payload ends inside the value");
    const at = i;
    i += k;
    return at;
  };
  const len = (k: number): number => {
    const at = need(k);
    let v = 0;
    for (let j = 0; j < k; j++) v = v * 256 + b[at + j];
    return v;
  };
  const str = (k: number): void => {
    const at = need(k);
    // Pure ASCII (the common case) needs no decoder.
    for (let j = at; j < at + k; j++) {
      if (b[j] >= 0x80) {
        utf8Fatal.decode(b.subarray(at, at + k)); // throws on invalid UTF-8
        return;
      }
    }
  };
  const open = (count: number, map: boolean): void => {
    if (left.length > MAX_DEPTH) throw new Error(`the value is nested deeper than ${MAX_DEPTH} arrays and maps`);
    left.push(map ? 2 * count : count);
    isMap.push(map);
  };
  while (left.length > 0) {
    const top = left.length - 1;
    if (left[top] === 0) {
      left.pop();
      isMap.pop();
      continue;
    }
    const key = isMap[top] && left[top] % 2 === 0;
    left[top]--;
    const t = b[need(1)];
    if (key && !((t >= 0xa0 && t <= 0xbf) || (t >= 0xd9 && t <= 0xdb))) {
      throw new Error(`a map key must be a string, got the type byte 0x${t.toString(16)}`);
    }
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) continue;
    if (t <= 0x8f) open(t & 0x0f, true);
    else if (t <= 0x9f) open(t & 0x0f, false);
    else if (t <= 0xbf) str(t & 0x1f);
    else if (t === 0xc1) throw new Error("0xc1 is not a MessagePack value");
    else if ((t >= 0xc7 && t <= 0xc9) || (t >= 0xd4 && t <= 0xd8)) {
      throw new Error(`MessagePack ext types are not part of the data model (type byte 0x${t.toString(16)})`);
    } else if (t >= 0xc4 && t <= 0xc6) need(len(1 << (t - 0xc4)));
    else if (t >= 0xd9 && t <= 0xdb) str(len(1 << (t - 0xd9)));
    else if (t === 0xca || t === 0xce || t === 0xd2) need(4);
    else if (t === 0xcb || t === 0xcf || t === 0xd3) need(8);
    else if (t === 0xcc || t === 0xd0) need(1);
    else if (t === 0xcd || t === 0xd1) need(2);
    else if (t === 0xdc || t === 0xdd) open(len(t === 0xdc ? 2 : 4), false);
    else open(len(t === 0xde ? 2 : 4), true); // 0xde, 0xdf
  }
  if (i !== n) throw new Error(`${n - i} trailing bytes after the value`);
}
