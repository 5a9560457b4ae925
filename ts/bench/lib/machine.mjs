// What the numbers were measured on, and how busy the machine was with
// other work meanwhile (the 2-CPU machines are shared: a compile elsewhere
// distorts every figure, so the report says how much CPU others took).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

/** CPU model, cores, kernel, Node version, load, commit (and whether ts/ had uncommitted changes). */
export function machineInfo() {
  const git = (...args) => execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  let commit = null;
  let localChanges = null;
  try {
    commit = git('rev-parse', '--short', 'HEAD');
    // The SDK and the bench as measured may differ from the commit.
    localChanges = git('status', '--porcelain', '--', ':/ts').length > 0;
  } catch {
    // Not a git checkout: the report just has no commit.
  }
  return {
    cpu: os.cpus()[0]?.model ?? 'unknown',
    cores: os.availableParallelism(),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    v8: process.versions.v8,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
    commit,
    localChanges,
    date: new Date().toISOString(),
  };
}

/** Busy clock ticks of the whole machine and of this process with its reaped children; null without /proc. */
function ticks() {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
    const busy = cpu[0] + cpu[1] + cpu[2] + cpu[5] + cpu[6] + (cpu[7] ?? 0);
    const self = readFileSync('/proc/self/stat', 'utf8');
    const f = self.slice(self.lastIndexOf(')') + 2).split(' ');
    // utime stime cutime cstime are fields 14–17 of stat, 12–15 after the command name.
    const own = Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    return { busy, own };
  } catch {
    return null;
  }
}

/**
 * Starts watching the machine. `stop()` returns the share of the machine's
 * CPU (0–100 %, all cores) that processes other than the bench (and the
 * peers it started and reaped) used since.
 */
export function watchForeignCpu() {
  const t0 = ticks();
  const wall0 = performance.now();
  return () => {
    const t1 = ticks();
    if (!t0 || !t1) return null;
    const secs = (performance.now() - wall0) / 1e3;
    const hz = 100; // USER_HZ on Linux
    const foreign = Math.max(0, t1.busy - t0.busy - (t1.own - t0.own)) / hz;
    return Math.round((1000 * foreign) / (secs * os.availableParallelism())) / 10;
  };
}
