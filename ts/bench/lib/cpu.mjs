// CPU accounting for a measured interval, so that a variant which spins to
// save a wake-up shows what it burns. Linux gives per-thread run time in
// nanoseconds in /proc/<pid>/task/<tid>/schedstat; elsewhere only the whole
// process (process.cpuUsage) is known and the per-side split is null.
import { readdirSync, readFileSync } from 'node:fs';

/** Run time in ns of every thread of `pid` ('self' for this process), by thread id; null without /proc. */
function taskTimes(pid) {
  const times = new Map();
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
        times.set(tid, ns);
      } catch {
        // The thread ended between the listing and the read: it no longer runs.
      }
    }
  } catch {
    return null;
  }
  return times;
}

/**
 * Starts measuring an interval. `peerPid` is the pid of a child process whose
 * CPU should be counted as the peer's; without it, the peer is every thread of
 * this process other than the main one (the worker, plus V8/libuv helpers).
 */
export function cpuStart(peerPid) {
  return {
    wall: performance.now(),
    usage: process.cpuUsage(),
    self: taskTimes('self'),
    peer: peerPid ? taskTimes(peerPid) : null,
    peerPid,
  };
}

/**
 * Ends the interval begun by `start` and returns seconds: wall, main (this
 * process's main thread), peer (worker threads, or the child process), total
 * (this whole process by process.cpuUsage, plus the child if any).
 */
export function cpuEnd(start) {
  const wall = (performance.now() - start.wall) / 1e3;
  const u = process.cpuUsage(start.usage);
  const processSecs = (u.user + u.system) / 1e6;
  const self = taskTimes('self');
  let main = null;
  let peer = null;
  if (self && start.self) {
    const mainTid = String(process.pid);
    main = ((self.get(mainTid) ?? 0) - (start.self.get(mainTid) ?? 0)) / 1e9;
    if (!start.peerPid) {
      // Threads that started during the interval count from zero.
      let others = 0;
      for (const [tid, ns] of self) if (tid !== mainTid) others += ns - (start.self.get(tid) ?? 0);
      peer = others / 1e9;
    }
  }
  let total = processSecs;
  if (start.peerPid) {
    const now = taskTimes(start.peerPid);
    if (now && start.peer) {
      let d = 0;
      for (const [tid, ns] of now) d += ns - (start.peer.get(tid) ?? 0);
      peer = d / 1e9;
      total += peer;
    }
  }
  return { wall, main, peer, total };
}

/** The pids of every descendant process of this one (Chromium and its helpers, for a browser run). */
function descendants() {
  const children = new Map();
  for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
      const ppid = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(pid);
    } catch {
      // The process ended during the scan.
    }
  }
  const out = [];
  const queue = [String(process.pid)];
  while (queue.length) for (const c of children.get(queue.shift()) ?? []) out.push(c), queue.push(c);
  return out;
}

/**
 * A snapshot of every thread of every process this one started (the
 * browser): key "pid/tid" → { pid, tid, ns, name (thread name), renderer
 * (whether the process is a renderer) }. Null without /proc.
 */
export function chromiumThreads() {
  const snap = new Map();
  try {
    for (const pid of descendants()) {
      let renderer = false;
      try {
        renderer = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer');
      } catch {
        continue;
      }
      for (const [tid, ns] of taskTimes(pid) ?? []) {
        let name = '';
        try {
          name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
        } catch {
          // The thread ended; its time still counts.
        }
        snap.set(`${pid}/${tid}`, { pid, tid, ns, name, renderer });
      }
    }
  } catch {
    return null;
  }
  return snap;
}
