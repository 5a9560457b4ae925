// Runs a measured body with CPU accounting (Node only: it reads /proc).
import { cpuStart, cpuEnd } from './cpu.mjs';

/** Runs `body()` (which resolves to `{ calls, wrong }`) and adds its CPU seconds as `cpu` (see cpu.mjs). */
export async function withCpu(body, peerPid) {
  const start = cpuStart(peerPid);
  const r = await body();
  return { ...r, cpu: cpuEnd(start) };
}
