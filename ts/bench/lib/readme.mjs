// Rewrites the results in ts/bench/README.md: each study's block lies
// between its own pair of markers, so a run of one study leaves the others'
// latest results in place.
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const README = fileURLToPath(new URL('../README.md', import.meta.url));

/** Replaces the block of each study in `sections` ({ id: markdown }); returns the README's path. */
export function rewriteReadme(sections) {
  let text = readFileSync(README, 'utf8');
  for (const [id, markdown] of Object.entries(sections)) {
    const begin = `<!-- results ${id} begin (written by run.mjs; do not edit by hand) -->`;
    const end = `<!-- results ${id} end -->`;
    const from = text.indexOf(begin);
    const to = text.indexOf(end);
    if (from < 0 || to < from) throw new Error(`${README} has no markers for study ${id}`);
    text = `${text.slice(0, from + begin.length)}\n${markdown}\n${text.slice(to)}`;
  }
  writeFileSync(README, text);
  return README;
}
