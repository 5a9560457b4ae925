/**
 * The conformance service (`conformance/README.md`): the methods every
 * testee offers in the provider role. Methods with a typed input are
 * declared through the typed layer, so an input of the wrong shape is
 * answered `invalid_argument`, as a statically typed peer would.
 */

import { fail, method, Provider, type CallContext } from "hubwire";
import { any, bytes, int, ms as Ms, nat } from "./schemas.js";

const sleepDef = method("sleep", { input: Ms, output: any });
const bigDef = method("big", { input: nat, output: bytes, raw: "output" });
const countDef = method("count", { kind: "server_stream", input: nat, output: nat });
const failAfterDef = method("fail_after", { kind: "server_stream", input: nat, output: nat, failure: any });
const foreverDef = method("forever", { kind: "server_stream", input: Ms, output: nat });
const sumDef = method("sum", { kind: "client_stream", input: int, output: int });

/** Reports `cancelled` for `method` when the call's signal aborts. */
function probe(ctx: CallContext, emit: (e: Record<string, unknown>) => void): void {
  ctx.signal.addEventListener("abort", () => emit({ event: "cancelled", method: ctx.method }), { once: true });
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });

/** The conformance service; `emit` reports events to the runner. */
export function conformanceService(emit: (e: Record<string, unknown>) => void): Provider {
  return new Provider("conformance")
    .unary("echo", (b: Uint8Array) => b, { raw: true })
    .unary("echo_value", (v: unknown) => v)
    .unary("fail", (v: unknown) => fail(v))
    .unary(
      "panic",
      () => {
        throw new Error("conformance: the caller asked for a panic");
      },
      { raw: "input" },
    )
    .implement(sleepDef, async ({ ms }, ctx) => {
      probe(ctx, emit);
      await sleep(ms, ctx.signal);
      return null;
    })
    .implement(bigDef, (n) => new Uint8Array(n).fill(97))
    .implement(countDef, function* (n) {
      for (let i = 0; i < n; i++) yield i;
    })
    .implement(failAfterDef, function* (n) {
      for (let i = 0; i < n; i++) yield i;
      return fail({ after: n });
    })
    .implement(foreverDef, async function* ({ ms }, ctx) {
      probe(ctx, emit);
      for (let i = 0; !ctx.signal.aborted; i++) {
        yield i;
        await sleep(Math.max(1, ms), ctx.signal);
      }
    })
    .implement(sumDef, async (items) => {
      let total = 0;
      for await (const x of items) total += x;
      return total;
    })
    .clientStream("first", async (items: AsyncIterable<unknown>) => {
      for await (const x of items) return x;
      return null;
    })
    .bidi("echo_stream", async function* (items: AsyncIterable<unknown>) {
      for await (const x of items) yield x;
    });
}
