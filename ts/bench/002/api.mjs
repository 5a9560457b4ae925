// The service of study 002: a query (read a user) and a mutation (create a
// user), as plain handlers, as Standard Schema (zod) declarations for
// hubwire's typed layer, and as hubwire Providers offering both methods
// under the same names in three ways: untyped ("plain"), typed with
// validation ("typed") and typed with validation switched off ("loose"),
// one provider (and connection) each.
import { z } from 'zod';

const USERS = Array.from({ length: 100 }, (_, i) => ({
  id: i,
  name: `user ${i}`,
  email: `user${i}@example.com`,
  active: i % 3 !== 0,
  tags: ['alpha', 'beta'],
}));
let nextId = 1000;

/** The handlers, shared by every variant: what the study calls the query and the mutation. */
export const handlers = {
  getUser: ({ id }) => USERS[id % USERS.length],
  createUser: ({ name, email, tags }) => {
    nextId++;
    return { id: nextId, createdAt: 1_700_000_000_000 + nextId, name, email, tags };
  },
};

/** The input of call `i` of `method`, and whether `result` is its right answer. */
export const inputs = {
  getUser: (i) => ({ id: i }),
  createUser: (i) => ({ name: `new user ${i}`, email: `new${i}@example.com`, tags: ['x'] }),
};
export const isAnswer = {
  getUser: (i, r) => r?.id === i % USERS.length && r.email === USERS[i % USERS.length].email,
  createUser: (i, r) => r?.email === `new${i}@example.com` && Number.isInteger(r.id),
};

const User = z.object({ id: z.number().int(), name: z.string(), email: z.string(), active: z.boolean(), tags: z.array(z.string()) });
const schemas = {
  getUser: {
    input: z.object({ id: z.number().int().nonnegative() }),
    output: User,
    failure: z.object({ kind: z.literal('not_found') }),
  },
  createUser: {
    input: z.object({ name: z.string().min(1), email: z.string().email(), tags: z.array(z.string()) }),
    output: z.object({ id: z.number().int(), createdAt: z.number(), name: z.string(), email: z.string(), tags: z.array(z.string()) }),
    failure: z.object({ kind: z.literal('email_taken') }),
  },
};

/** The typed declarations: `{ typed: { getUser, createUser }, loose: { … } }` (loose = validate: false). */
export function declarations(hubwire) {
  const make = (validate) => Object.fromEntries(Object.entries(schemas).map(([name, s]) => [name, hubwire.method(name, { ...s, validate })]));
  return { typed: make(true), loose: make(false) };
}

/** The Provider of `style` ('plain', 'typed' or 'loose') offering both methods. */
export function provider(hubwire, style) {
  let p = new hubwire.Provider(`bench-002-${style}`);
  if (style === 'plain') {
    for (const [name, handler] of Object.entries(handlers)) p = p.unary(name, handler);
    return p;
  }
  const decl = declarations(hubwire)[style];
  for (const [name, handler] of Object.entries(handlers)) p = p.implement(decl[name], handler);
  return p;
}

/** The provider styles, one connection each. */
export const STYLES = ['plain', 'typed', 'loose'];
