/**
 * Type tests for the typed layer: `tsc` (run by the build) fails if a
 * line marked `@ts-expect-error` type-checks, or if an inferred type is
 * wrong. Never executed.
 */

import { z } from "zod";
import * as v from "valibot";
import { fail, method, Provider, type Connection } from "hubwire";

const divide = method("divide", {
  input: z.object({ a: z.number(), b: z.number() }),
  output: z.number(),
  failure: v.object({ kind: v.literal("division_by_zero") }),
});
const plain = method("plain", { input: z.string(), output: z.boolean() });
const stream = method("stream", { kind: "server_stream", input: z.number(), output: z.string() });

type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const assertType = <T extends true>(_: T) => {};

export async function typeTests(conn: Connection): Promise<void> {
  new Provider("p")
    .implement(divide, ({ a, b }) => (b === 0 ? fail({ kind: "division_by_zero" as const }) : a / b))
    // @ts-expect-error the handler must return a number
    .implement(divide, () => "not a number")
    // @ts-expect-error the input has no field c
    .implement(divide, ({ c }) => c)
    .implement(stream, function* (n) {
      yield String(n);
    })
    // @ts-expect-error a server stream yields strings
    .implement(stream, function* () {
      yield 1;
    });

  const out = await divide.call(conn, { a: 1, b: 2 });
  if (out.ok) assertType<Equal<typeof out.value, number>>(true);
  else assertType<Equal<typeof out.failure, { kind: "division_by_zero" }>>(true);
  // @ts-expect-error b is required
  await divide.call(conn, { a: 1 });
  // @ts-expect-error a is a number
  await divide.call(conn, { a: "1", b: 2 });

  const p = await plain.call(conn, "x");
  if (!p.ok) assertType<Equal<typeof p.failure, never>>(true);
  for await (const s of stream.stream(conn, 1)) assertType<Equal<typeof s, string>>(true);
  // @ts-expect-error a server-stream method has no unary call
  await stream.call(conn, 1);
}
