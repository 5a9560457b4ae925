/**
 * The status codes of `spec/errors.md` (the same table as
 * `spec/codes.json`, which a test checks this against).
 */

/** Every status code by name, with its wire value. */
export const CODES = {
  ok: 0,
  failure: 1,
  defect: 2,
  unknown_method: 3,
  invalid_argument: 4,
  deadline_exceeded: 5,
  cancelled: 6,
  unavailable: 7,
  resource_exhausted: 8,
  too_large: 9,
  protocol_error: 10,
  unsupported_version: 11,
  internal: 12,
  unauthenticated: 13,
} as const;

/** A status code's name, as spelled in APIs, logs and vectors. */
export type CodeName = keyof typeof CODES;

const NAMES: readonly CodeName[] = (() => {
  const names: CodeName[] = [];
  for (const [name, value] of Object.entries(CODES)) names[value] = name as CodeName;
  return names;
})();

/** The name of wire value `value`, or `undefined` for a reserved value. */
export function codeName(value: number): CodeName | undefined {
  return NAMES[value];
}
