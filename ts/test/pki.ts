/**
 * Throwaway certificates for the TLS tests, made by `openssl` when the
 * tests start (no key is checked in): a CA, a server certificate for
 * `localhost` and `127.0.0.1`, and a client certificate, all signed by
 * the CA. `null` when `openssl` is not installed (the TLS tests then skip).
 */

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** The PEM files, by path, and their text. */
export interface TestPki {
  dir: string;
  ca: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
}

function openssl(dir: string, args: string[]): void {
  execFileSync("openssl", args, { cwd: dir, stdio: ["ignore", "ignore", "pipe"] });
}

/** A new CA with a server and a client certificate, in a fresh directory (keys mode 0600). */
export function makePki(): TestPki | null {
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
  } catch {
    return null;
  }
  const dir = mkdtempSync(join(tmpdir(), "hubwire-ts-pki-"));
  // The files stay while the test process runs (a hub reads them by path)
  // and are removed when it exits, whether its tests passed or failed.
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"];
  openssl(dir, ["req", "-x509", ...key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=hubwire ts test CA"]);
  // Extensions make them X.509 v3 certificates: rustls (the hub) accepts no other kind.
  writeFileSync(join(dir, "server.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n");
  writeFileSync(join(dir, "client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
  for (const who of ["server", "client"]) {
    openssl(dir, ["req", ...key, "-keyout", `${who}.key`, "-out", `${who}.csr`, "-subj", `/CN=hubwire ts test ${who}`]);
    const sign = ["-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days", "2", "-extfile", `${who}.ext`];
    openssl(dir, ["x509", "-req", "-in", `${who}.csr`, "-out", `${who}.pem`, ...sign]);
  }
  const text = (f: string): string => readFileSync(join(dir, f), "utf8");
  return { dir, ca: text("ca.pem"), serverCert: text("server.pem"), serverKey: text("server.key"), clientCert: text("client.pem"), clientKey: text("client.key") };
}
