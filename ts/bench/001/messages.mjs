// The five messages of study 001. The study gives their names and JSON sizes
// (small 0.015 kB, medium 2.0 kB, big 78 kB, huge 576 kB, bigstring 79 kB)
// but not their contents; its conclusion (structured clone loses to JSON on
// many small objects, wins on one long string) tells their shape. These are
// built deterministically to those sizes: objects made of many small records
// for medium/big/huge, one long string for bigstring.

function record(i) {
  return {
    id: i,
    name: `user ${i}`,
    email: `user${i}@example.com`,
    active: i % 3 !== 0,
    score: Math.round(i * 7.31) / 100,
    tags: ['alpha', 'beta', `t${i % 7}`],
  };
}

/** An object of records whose JSON is just over `bytes` long. */
function records(bytes) {
  const msg = { kind: 'records', items: [] };
  let size = JSON.stringify(msg).length;
  for (let i = 0; size < bytes; i++) {
    const r = record(i);
    msg.items.push(r);
    size += JSON.stringify(r).length + (i > 0 ? 1 : 0);
  }
  return msg;
}

/** One string of `bytes` printable ASCII characters (not one repeated character). */
function text(bytes) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ 0123456789.,';
  let s = '';
  for (let i = 0; i < bytes; i++) s += alphabet[(i * 31 + (i >> 5)) % alphabet.length];
  return s;
}

/** Builds the message called `size` ('small', 'medium', 'big', 'huge' or 'bigstring'). */
export function message(size) {
  switch (size) {
    case 'small':
      return { msg: 'hello' };
    case 'medium':
      return records(2_000);
    case 'big':
      return records(78_000);
    case 'huge':
      return records(576_000);
    case 'bigstring':
      return { data: text(79_000) };
    default:
      throw new Error(`unknown message size ${size}`);
  }
}

/** The sizes in the study's order. */
export const SIZES = ['small', 'medium', 'big', 'huge', 'bigstring'];
