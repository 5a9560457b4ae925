/** The one assertion every suite needs: a promise fails with a `HubwireError` of a given code. */

import assert from "node:assert/strict";
import { HubwireError } from "hubwire";

/** Awaits `p`, which must reject with a `HubwireError` of `code`; returns that error. */
export async function rejects(p: Promise<unknown>, code: string): Promise<HubwireError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof HubwireError, `expected a HubwireError, got ${e}`);
    assert.equal(e.code, code, e.message);
    return e;
  }
  assert.fail(`expected ${code}, it succeeded`);
}
