/**
 * The few input types of the conformance service, as hand-written
 * Standard Schema validators (the interface zod, valibot and others
 * implement): the testee starts once per case, so it loads no validator
 * library.
 */

import type { StandardSchemaV1 } from "@standard-schema/spec";

function schema<T>(describe: string, ok: (v: unknown) => v is T): StandardSchemaV1<T> {
  return {
    "~standard": {
      version: 1,
      vendor: "hubwire-testee",
      validate: (value) => (ok(value) ? { value } : { issues: [{ message: `expected ${describe}, got ${JSON.stringify(value)}` }] }),
    },
  };
}

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v);

/** An integer. */
export const int = schema("an integer", isInt);
/** A non-negative integer. */
export const nat = schema("a non-negative integer", (v): v is number => isInt(v) && v >= 0);
/** `{ms: n}` with n a non-negative integer. */
export const ms = schema("{ms: n}", (v): v is { ms: number } => {
  const n = typeof v === "object" && v !== null ? (v as { ms?: unknown }).ms : undefined;
  return isInt(n) && n >= 0;
});
/** Anything (outputs the testee produces itself). */
export const any = schema("anything", (_v): _v is unknown => true);
/** Raw bytes. */
export const bytes = schema("bytes", (v): v is Uint8Array => v instanceof Uint8Array);
