// The one place the Node side of the bench loads the SDK: the package entry
// ("hubwire", which this package resolves to itself through its exports, as
// ts/README.md prescribes), never its internals. Loaded on demand, so the
// baselines run, and say why the hubwire rows are missing, when the SDK has
// not been built.
let loaded;

/** The hubwire module (the Node build), imported once. */
export function loadHubwire() {
  loaded ??= import('hubwire').catch((err) => {
    throw new Error(`cannot load the hubwire SDK (build it: make build-ts): ${err.message}`);
  });
  return loaded;
}
