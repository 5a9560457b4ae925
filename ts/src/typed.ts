/**
 * The typed layer: a method declared once with Standard Schema validators
 * (zod, valibot, arktype, Effect Schema, …) for its input, output and
 * declared failure. TypeScript infers the handler's and the caller's types
 * from the schemas; a declared failure reaches the caller as a typed
 * `Outcome`, a thrown bug as a `defect` error.
 *
 * Each side validates what it receives: the provider the input (a bad one
 * is answered `invalid_argument`), the caller the output and the failure
 * (a bad one is `internal`). `validate: false` switches both off for a
 * method; the types stay.
 */

import type { StandardSchemaV1 } from "@standard-schema/spec";
import { Failure, HubwireError } from "./errors.js";
import type { CallContext } from "./context.js";
import { KINDS, streamsIn, type Kind } from "./hello.js";
import type { Answer, Outputs, Provider } from "./provider.js";
import type { CallOptions } from "./client.js";
import { ItemStream } from "./stream.js";
import type { Connection } from "./connection.js";
import type { CodeName } from "./codes.js";

type Schema = StandardSchemaV1;
type In<S extends Schema> = StandardSchemaV1.InferInput<S>;
type Out<S extends Schema> = StandardSchemaV1.InferOutput<S>;
/** The failure type of a method: `never` when it declares none. */
type FailOf<F> = F extends Schema ? Out<F> : never;
type FailIn<F> = F extends Schema ? In<F> : never;

/** What a typed call ends with: the output, or the method's declared failure. */
export type Outcome<O, F> = { ok: true; value: O } | { ok: false; failure: F };

/** How a method is declared. */
export interface MethodSpec<I extends Schema, O extends Schema, F extends Schema | undefined, K extends Kind> {
  input: I;
  output: O;
  /** The declared failure's schema, if the method has one. */
  failure?: F;
  /** The call kind (default `"unary"`). */
  kind?: K;
  /** Validate what each side receives (default `true`). */
  validate?: boolean;
  /** Raw bytes on the wire for the input, the output or both, as in `MethodOptions` (the schemas then see `Uint8Array`s). */
  raw?: boolean | "input" | "output";
  /** One line saying what the method does. */
  doc?: string;
  /** JSON Schemas for HELLO; by default taken from schemas that implement Standard JSON Schema. */
  describe?: { input?: unknown; output?: unknown; errors?: unknown };
}

type Handlers<I extends Schema, O extends Schema, F> = {
  unary: (input: Out<I>, ctx: CallContext) => Answer<In<O>> | Failure<FailIn<F>>;
  server_stream: (input: Out<I>, ctx: CallContext) => Outputs<In<O>>;
  client_stream: (items: ItemStream<Out<I>>, ctx: CallContext) => Answer<In<O>> | Failure<FailIn<F>>;
  bidi: (items: ItemStream<Out<I>>, ctx: CallContext) => Outputs<In<O>>;
};

/** The caller's side of a client stream or a bidi call. */
export interface TypedInputs<I> {
  send(item: I): Promise<void>;
  cancel(): void;
}

type Callers<I extends Schema, O extends Schema, F> = {
  unary: { call(conn: Connection, input: In<I>, options?: CallOptions): Promise<Outcome<Out<O>, FailOf<F>>> };
  server_stream: { stream(conn: Connection, input: In<I>, options?: CallOptions): ItemStream<Out<O>> };
  client_stream: {
    open(conn: Connection, options?: CallOptions): TypedInputs<In<I>> & { finish(): Promise<Outcome<Out<O>, FailOf<F>>> };
  };
  bidi: { open(conn: Connection, options?: CallOptions): TypedInputs<In<I>> & AsyncIterable<Out<O>> & { end(): void } };
};

/** A declared method: register it with `provider.implement(def, handler)`, call it with `def.call` / `stream` / `open`. */
export type MethodDef<I extends Schema, O extends Schema, F extends Schema | undefined, K extends Kind> = {
  readonly name: string;
  readonly kind: K;
  readonly spec: MethodSpec<I, O, F, K>;
  /** @internal Registers the handler on a provider (what `provider.implement` calls). */
  register(provider: Provider, handler: Handlers<I, O, F>[K]): void;
} & Callers<I, O, F>[K];

function isPromise(v: unknown): v is Promise<unknown> {
  return typeof v === "object" && v !== null && typeof (v as Promise<unknown>).then === "function";
}

function unwrap(r: StandardSchemaV1.Result<unknown>, code: CodeName, what: string): unknown {
  if (r.issues === undefined) return r.value;
  const detail = r.issues.map((i) => (i.path?.length ? `${i.path.map((p) => (typeof p === "object" ? p.key : p)).join(".")}: ` : "") + i.message);
  throw new HubwireError(code, `${what} failed validation: ${detail.join("; ")}`);
}

/** Validates `value`; synchronous when the validator is. */
function check(schema: Schema, value: unknown, code: CodeName, what: string): unknown {
  const r = schema["~standard"].validate(value);
  return isPromise(r) ? r.then((x) => unwrap(x, code, what)) : unwrap(r, code, what);
}

async function* checkEach(items: AsyncIterable<unknown>, schema: Schema, code: CodeName, what: string): AsyncGenerator<unknown> {
  for await (const x of items) yield await check(schema, x, code, what);
}

/** `items`, each validated as it is read; cancelling it cancels `items`. */
function checked(items: ItemStream, schema: Schema, code: CodeName, what: string): ItemStream {
  return new ItemStream(checkEach(items, schema, code, what), () => items.cancel());
}

function jsonSchema(s: Schema | undefined, side: "input" | "output"): unknown {
  const conv = (s?.["~standard"] as { jsonSchema?: { input(o: object): unknown; output(o: object): unknown } } | undefined)?.jsonSchema;
  if (conv === undefined) return {};
  try {
    return conv[side]({ target: "draft-2020-12" });
  } catch {
    return {};
  }
}

/** Declares a method (see {@link MethodSpec}); `kind` picks the call kind and the API that goes with it. */
export function method<I extends Schema, O extends Schema, F extends Schema | undefined = undefined, K extends Kind = "unary">(
  name: string,
  spec: MethodSpec<I, O, F, K>,
): MethodDef<I, O, F, K> {
  const kind = (spec.kind ?? "unary") as K;
  const on = spec.validate !== false;
  const failure = spec.failure as Schema | undefined;
  const inWhat = `${name}: input`;
  const outWhat = `${name}: output`;

  /** The caller's view of an error: a declared failure becomes an Outcome. */
  const outcomeOf = (e: unknown): unknown => {
    if (!(e instanceof HubwireError) || e.code !== "failure" || failure === undefined) throw e;
    if (!on) return { ok: false, failure: e.failure };
    const f = check(failure, e.failure, "internal", `${name}: failure`);
    return isPromise(f) ? f.then((v) => ({ ok: false, failure: v })) : { ok: false, failure: f };
  };
  const valueOf = (v: unknown): unknown => {
    if (!on) return { ok: true, value: v };
    const x = check(spec.output, v, "internal", outWhat);
    return isPromise(x) ? x.then((value) => ({ ok: true, value })) : { ok: true, value: x };
  };
  const outputs = (s: ItemStream) => (on ? checked(s, spec.output, "internal", outWhat) : s);

  const def = {
    name,
    kind,
    spec,
    register(provider: Provider, handler: (x: any, ctx: CallContext) => any) {
      const options = {
        raw: spec.raw,
        doc: spec.doc,
        schema: {
          input: spec.describe?.input ?? jsonSchema(spec.input, "input"),
          output: spec.describe?.output ?? jsonSchema(spec.output, "output"),
          errors: spec.describe?.errors ?? (failure ? jsonSchema(failure, "output") : undefined),
        },
      };
      const wrapped = !on
        ? handler
        : streamsIn(KINDS.indexOf(kind))
          ? (it: ItemStream, ctx: CallContext) => handler(checked(it, spec.input, "invalid_argument", inWhat), ctx)
          : (input: unknown, ctx: CallContext) => {
              const v = check(spec.input, input, "invalid_argument", inWhat);
              return isPromise(v) ? v.then((x) => handler(x, ctx)) : handler(v, ctx);
            };
      const add = { unary: provider.unary, server_stream: provider.serverStream, client_stream: provider.clientStream, bidi: provider.bidi }[kind];
      add.call(provider, name, wrapped as never, options);
    },
    call(conn: Connection, input: unknown, options?: CallOptions) {
      return conn.call(name, input, options).then(valueOf, outcomeOf);
    },
    stream(conn: Connection, input: unknown, options?: CallOptions) {
      return outputs(conn.serverStream(name, input, options));
    },
    open(conn: Connection, options?: CallOptions) {
      if (kind === "client_stream") {
        const cs = conn.clientStream(name, options);
        return {
          send: (x: unknown) => cs.send(x),
          cancel: () => cs.cancel(),
          finish: () => cs.finish().then(valueOf, outcomeOf),
        };
      }
      const bd = conn.bidi(name, options);
      const out = outputs(bd);
      return {
        send: (x: unknown) => bd.send(x),
        end: () => bd.end(),
        cancel: () => bd.cancel(),
        [Symbol.asyncIterator]: () => out[Symbol.asyncIterator](),
      };
    },
  };
  return def as unknown as MethodDef<I, O, F, K>;
}
