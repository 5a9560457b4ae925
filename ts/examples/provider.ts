/**
 * An example TypeScript provider, the one `make run`'s hub starts as a
 * child process: one chat command and a raw echo.
 *
 *   roll  {sides, count} -> {text}   e.g. {sides: 6, count: 3} -> {text: "rolled 3d6: 4 + 2 + 5 = 11"}
 *   echo  raw bytes, unchanged
 *
 * Started by a hubwire parent (HUBWIRE_FD set) it serves the parent;
 * otherwise `--unix PATH` or `--tcp HOST:PORT` listens there.
 */

import { z } from "zod";
import { child, fail, method, Provider, tcp, unix } from "hubwire";

const roll = method("roll", {
  input: z.object({ sides: z.number().int().min(2).max(1000), count: z.number().int().min(1) }),
  output: z.object({ text: z.string() }),
  failure: z.object({ kind: z.literal("too_many_dice"), max: z.number() }),
  doc: "Rolls dice: {sides (2 to 1000), count (1 to 100; more fails too_many_dice)} -> {text}",
});

const provider = new Provider("dice")
  .implement(roll, ({ sides, count }) => {
    // A declared failure: the caller gets it typed, not as a crash.
    if (count > 100) return fail({ kind: "too_many_dice" as const, max: 100 });
    const dice = Array.from({ length: count }, () => 1 + Math.floor(Math.random() * sides));
    const total = dice.reduce((a, b) => a + b, 0);
    return { text: `rolled ${count}d${sides}: ${dice.join(" + ")} = ${total}` };
  })
  .unary("echo", (bytes: Uint8Array) => bytes, { raw: true, doc: "Answers the bytes it was given" });

const [flag, address] = process.argv.slice(2);
if (process.env.HUBWIRE_FD !== undefined) {
  const why = await child.serveChild(provider);
  console.error(`dice: parent gone (${why.message})`);
  process.exit(0);
} else if (flag === "--unix" && address) {
  void provider.serve(await unix.listen(address));
  console.error(`dice: listening on unix:${address}`);
} else if (flag === "--tcp" && address) {
  const listener = await tcp.listen(address);
  void provider.serve(listener);
  console.error(`dice: listening on tcp:${listener.address}`);
} else {
  console.error("usage: provider.js --unix PATH | --tcp HOST:PORT   (or started by a hubwire parent, HUBWIRE_FD set)");
  process.exit(2);
}
