/**
 * The one error type of hubwire: every failure carries a status code of
 * `spec/errors.md`. A `failure` is a method's declared error (its value
 * travels in `failure`); a `defect` is a bug in the handler; the other
 * codes come from the protocol and the runtimes.
 */

import { CODES, type CodeName } from "./codes.js";

/** An error with a hubwire status code. */
export class HubwireError extends Error {
  /** The status code's name (`"unavailable"`, `"failure"`, …). */
  readonly code: CodeName;
  /** For `failure`: the decoded failure value the method declared. */
  readonly failure: unknown;

  constructor(code: CodeName, message: string, failure?: unknown) {
    super(message);
    this.name = "HubwireError";
    this.code = code;
    this.failure = failure;
  }

  /** The code's wire value. */
  get codeValue(): number {
    return CODES[this.code];
  }

  /** Whether this is a declared failure of the method (part of its contract). */
  get isFailure(): boolean {
    return this.code === "failure";
  }

  /** Whether this is a bug or crash in the handler. */
  get isDefect(): boolean {
    return this.code === "defect";
  }

  override toString(): string {
    return `${this.code}: ${this.message}`;
  }
}

/**
 * A declared failure, returned (or thrown) by a handler: `value` reaches
 * the caller as the RESPONSE's failure payload, encoded in the call's
 * codec. Anything else thrown is a `defect`.
 */
export class Failure<F = unknown> {
  constructor(readonly value: F) {}
}

/** Shorthand for `new Failure(value)`: `return fail({kind: "not_found"})`. */
export function fail<F>(value: F): Failure<F> {
  return new Failure(value);
}
