"""The Python bench: hubwire beside the ways Python programs already talk
to each other, every baseline measured in the same run on the same
machine. Each row is a client in this process and an echo server in
another (``servers.py``):

* round trip of a 64-byte message, one in flight: p50 and p99;
* pipelined small calls on one connection: calls per second;
* 1 MiB raw echo: MB/s of payload (one way per round trip);
* CPU per call: client and server CPU time over the round-trip loop.

    python bench/run.py                  # print the table
    python bench/run.py --readme bench/README.md   # and rewrite the results there
    python bench/run.py --smoke          # tiny counts: every row runs (the tests use it)
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import multiprocessing
import os
import platform
import queue
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection as MpConnection
from typing import Any, Callable

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import hubwire  # noqa: E402
import hubwire.blocking as hwb  # noqa: E402

sys.path.insert(0, HERE)
SERVERS = os.path.join(HERE, "servers.py")
SMALL = b"x" * 64
BULK = b"b" * (1 << 20)
_LEN = struct.Struct("<I")


#: The run's directory for the servers' Unix sockets (main() makes it, and
#: removes it when the run ends: a killed server leaves its socket behind).
SOCK_DIR = ""


def sock_path() -> str:
    """A fresh socket path in ``SOCK_DIR``."""
    return tempfile.mktemp(suffix=".sock", dir=SOCK_DIR)


class Budget:
    """How much of each measurement to do."""

    def __init__(self, smoke: bool) -> None:
        self.rounds = 2 if smoke else 5
        self.rtt = 20 if smoke else 5000
        self.warm = 5 if smoke else 300
        self.pipe_seconds = 0.1 if smoke else 2.0
        self.bulk = 2 if smoke else 50


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * p))]


class Row:
    """One implementation: a client here, a server there."""

    name = ""
    transport = ""
    server_pid = 0

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def call(self, data: bytes) -> bytes:
        raise NotImplementedError

    def pipelined(self, seconds: float) -> float:
        """Calls per second with many in flight (default: none: one at a time)."""
        raise NotImplementedError

    def rtt(self, n: int) -> tuple[list[float], float]:
        """``n`` round trips of a small message: their latencies, and the CPU
        seconds both processes spent on them."""
        lat = []
        c0, s0 = time.process_time(), cpu_of(self.server_pid)
        for _ in range(n):
            t = time.perf_counter()
            self.call(SMALL)
            lat.append(time.perf_counter() - t)
        return lat, time.process_time() - c0 + cpu_of(self.server_pid) - s0

    def bulk(self, n: int) -> float:
        """Seconds for ``n`` 1 MiB echoes."""
        t = time.perf_counter()
        for _ in range(n):
            assert len(self.call(BULK)) == len(BULK)
        return time.perf_counter() - t


def spawn_server(*args: str) -> subprocess.Popen[str]:
    p = subprocess.Popen([sys.executable, SERVERS, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    assert line.strip() == "ready", f"server {args} said {line!r}"
    return p


def end_server(p: subprocess.Popen[str]) -> None:
    try:
        assert p.stdin is not None
        p.stdin.close()
    except OSError:
        pass
    try:
        p.wait(5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class SocketRow(Row):
    """The floor: a Unix socket, 4-byte length framing, nothing else."""

    name, transport = "socket echo (floor)", "unix"

    def start(self) -> None:
        self.path = sock_path()
        self.proc = spawn_server("socket", self.path)
        self.server_pid = self.proc.pid
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(self.path)

    def _recv(self) -> bytes:
        from servers import recv_exact

        head = recv_exact(self.s, 4)
        assert head is not None
        (n,) = _LEN.unpack(head)
        body = recv_exact(self.s, n)
        assert body is not None
        return bytes(body)

    def call(self, data: bytes) -> bytes:
        self.s.sendmsg([_LEN.pack(len(data)), data])
        return self._recv()

    def pipelined(self, seconds: float) -> float:
        k, n, end = 64, 0, time.perf_counter() + seconds
        batch = (_LEN.pack(len(SMALL)) + SMALL) * k
        t = time.perf_counter()
        while time.perf_counter() < end:
            self.s.sendall(batch)
            for _ in range(k):
                self._recv()
            n += k
        return n / (time.perf_counter() - t)

    def stop(self) -> None:
        self.s.close()
        end_server(self.proc)


def _pipe_echo(c: MpConnection) -> None:
    from servers import pin

    pin()
    try:
        while True:
            c.send_bytes(c.recv_bytes())
    except EOFError:
        pass


class PipeRow(Row):
    """``multiprocessing.Pipe`` (send_bytes/recv_bytes: no pickling)."""

    name, transport = "multiprocessing.Pipe", "pipe"

    def start(self) -> None:
        ours, theirs = multiprocessing.Pipe()
        self.proc = multiprocessing.Process(target=_pipe_echo, args=(theirs,), daemon=True)
        self.proc.start()
        theirs.close()
        self.c = ours
        assert self.proc.pid is not None
        self.server_pid = self.proc.pid

    def call(self, data: bytes) -> bytes:
        self.c.send_bytes(data)
        return self.c.recv_bytes()

    def pipelined(self, seconds: float) -> float:
        k, n, end = 64, 0, time.perf_counter() + seconds
        t = time.perf_counter()
        while time.perf_counter() < end:
            for _ in range(k):
                self.c.send_bytes(SMALL)
            for _ in range(k):
                self.c.recv_bytes()
            n += k
        return n / (time.perf_counter() - t)

    def stop(self) -> None:
        self.c.close()
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


class MpConnRow(PipeRow):
    """``multiprocessing.connection`` over a Unix socket."""

    name, transport = "multiprocessing.connection", "unix"

    def start(self) -> None:
        from multiprocessing.connection import Client

        path = sock_path()
        self.sproc = spawn_server("mpconn", path)
        self.server_pid = self.sproc.pid
        self.c = Client(path, family="AF_UNIX")

    def stop(self) -> None:
        self.c.close()
        end_server(self.sproc)


class GrpcRow(Row):
    """grpcio over a Unix socket, bytes in and out (generic handlers)."""

    transport = "unix"

    def __init__(self, bidi: bool) -> None:
        self.bidi = bidi
        self.name = "grpcio bidi stream" if bidi else "grpcio unary"

    def start(self) -> None:
        import grpc

        path = sock_path()
        self.proc = spawn_server("grpc", f"unix:{path}")
        self.server_pid = self.proc.pid
        opts = [("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)]
        self.channel = grpc.insecure_channel(f"unix:{path}", options=opts)
        self.unary = self.channel.unary_unary("/bench/Echo")
        self.stream_call = self.channel.stream_stream("/bench/Stream")
        if self.bidi:
            self.q: queue.Queue[bytes | None] = queue.Queue()
            self.responses = self.stream_call(iter(self.q.get, None))

    def call(self, data: bytes) -> bytes:
        if self.bidi:
            self.q.put(data)
            return next(self.responses)  # type: ignore[no-any-return]
        return self.unary(data)  # type: ignore[no-any-return]

    def pipelined(self, seconds: float) -> float:
        if not self.bidi:
            raise NotImplementedError
        # Messages per second on one bidi stream: a sender thread keeps up
        # to 256 messages ahead of the reader.
        ahead = threading.Semaphore(256)
        stop = threading.Event()

        def sender() -> None:
            while not stop.is_set():
                ahead.acquire()
                self.q.put(SMALL)

        th = threading.Thread(target=sender, daemon=True)
        n, t = 0, time.perf_counter()
        end = t + seconds
        th.start()
        while time.perf_counter() < end:
            next(self.responses)
            ahead.release()
            n += 1
        stop.set()
        rate = n / (time.perf_counter() - t)
        ahead.release()
        th.join()
        # Read what is still in flight, up to a marker, so later round trips pair up.
        marker = b"m" * 64 + b"end"
        self.q.put(marker)
        while next(self.responses) != marker:
            pass
        return rate

    def stop(self) -> None:
        if self.bidi:
            self.q.put(None)
        self.channel.close()
        end_server(self.proc)


class HubwireRow(Row):
    """The Python SDK's client (blocking or asyncio) and a Python provider."""

    def __init__(self, api: str, transport: str) -> None:
        self.api = api
        self.transport = transport
        self.name = f"hubwire {api}"

    def _open(self) -> hubwire.Connection:
        async def go() -> hubwire.Connection:
            if self.transport == "child":
                return await hubwire.spawn([sys.executable, SERVERS, "hubwire"], name="bench", env=dict(os.environ))
            return await hubwire.connect(self.address)

        return go  # type: ignore[return-value]

    def start(self) -> None:
        self.proc: subprocess.Popen[str] | None = None
        if self.transport != "child":
            self.address = f"unix:{sock_path()}" if self.transport == "unix" else "tcp:127.0.0.1:0"
            if self.transport == "tcp":
                s = socket.socket()
                s.bind(("127.0.0.1", 0))
                self.address = f"tcp:127.0.0.1:{s.getsockname()[1]}"
                s.close()
            self.proc = spawn_server("hubwire", self.address)
            self.server_pid = self.proc.pid
        if self.api == "blocking":
            if self.transport == "child":
                self.sync = hwb.spawn([sys.executable, SERVERS, "hubwire"], name="bench", env=dict(os.environ))
            else:
                self.sync = hwb.connect(self.address)
            if self.transport == "child":
                assert self.sync.child is not None
                self.server_pid = self.sync.child.process.pid
        else:
            self.loop = asyncio.new_event_loop()
            self.conn = self.loop.run_until_complete(self._open()())  # type: ignore[operator]
            if self.transport == "child":
                assert self.conn.child is not None
                self.server_pid = self.conn.child.process.pid

    def call(self, data: bytes) -> bytes:
        if self.api == "blocking":
            return self.sync.call_raw("echo", data)
        return self.loop.run_until_complete(self.conn.call_raw("echo", data))

    def rtt(self, n: int) -> tuple[list[float], float]:
        if self.api == "blocking":
            return super().rtt(n)

        async def go() -> tuple[list[float], float]:  # as an asyncio program would: inside the loop
            conn, lat = self.conn, []
            c0, s0 = time.process_time(), cpu_of(self.server_pid)
            for _ in range(n):
                t = time.perf_counter()
                await conn.call_raw("echo", SMALL)
                lat.append(time.perf_counter() - t)
            return lat, time.process_time() - c0 + cpu_of(self.server_pid) - s0

        return self.loop.run_until_complete(go())

    def bulk(self, n: int) -> float:
        if self.api == "blocking":
            return super().bulk(n)

        async def go() -> float:
            t = time.perf_counter()
            for _ in range(n):
                assert len(await self.conn.call_raw("echo", BULK)) == len(BULK)
            return time.perf_counter() - t

        return self.loop.run_until_complete(go())

    def pipelined(self, seconds: float) -> float:
        if self.api == "blocking":
            # Eight threads, one call in flight each, on one connection.
            counts = [0] * 8
            end = time.perf_counter() + seconds

            def worker(i: int) -> None:
                while time.perf_counter() < end:
                    self.sync.call_raw("echo", SMALL)
                    counts[i] += 1

            t = time.perf_counter()
            ths = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            return sum(counts) / (time.perf_counter() - t)

        async def run() -> float:
            conn = self.conn
            n = 0
            end = time.perf_counter() + seconds

            async def worker() -> None:
                nonlocal n
                while time.perf_counter() < end:
                    await conn.call_raw("echo", SMALL)
                    n += 1

            t = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(256)))
            return n / (time.perf_counter() - t)

        return self.loop.run_until_complete(run())

    def stop(self) -> None:
        if self.api == "blocking":
            self.sync.close()
        else:
            self.conn.close()
            if self.conn.child is not None:
                self.loop.run_until_complete(self.conn.child.wait())
            self.loop.close()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def rows() -> list[Row]:
    out: list[Row] = [SocketRow(), PipeRow(), MpConnRow(), GrpcRow(False), GrpcRow(True)]
    for api in ("blocking", "asyncio"):
        for t in ("child", "unix", "tcp"):
            out.append(HubwireRow(api, t))
    return out


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} vCPUs, Linux {platform.release()}, Python {platform.python_version()}"


def fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| client ↔ server | transport | round trip p50 (µs) | p99 (µs) | pipelined (calls/s) | 1 MiB echo (MB/s) | CPU per call (µs) |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lines.append(f"| {r['name']} | {r['transport']} | {fmt(r['p50_us'], 1)} | {fmt(r['p99_us'], 1)} | {fmt(r['calls_per_s'])} | "
                     f"{fmt(r['bulk_mb_s'])} | {fmt(r['cpu_us_per_call'], 1)} |")
    return "\n".join(lines)


def targets(results: list[dict[str, Any]]) -> str:
    by = {(r["name"], r["transport"]): r for r in results}
    pipe = by[("multiprocessing.Pipe", "pipe")]["p50_us"]
    grpc_u = by[("grpcio unary", "unix")]["p50_us"]
    grpc_b = by[("grpcio bidi stream", "unix")]["calls_per_s"]
    floor = by[("socket echo (floor)", "unix")]["bulk_mb_s"]
    out = ["| target | measured | met? |", "|---|---|---|"]

    def row(what: str, value: float, ok: bool, unit: str) -> None:
        out.append(f"| {what} | {value:.2f}{unit} | {'yes' if ok else 'no'} |")

    for t in ("child", "unix", "tcp"):
        b = by[("hubwire blocking", t)]["p50_us"]
        row(f"blocking, one call in flight, {t}: ≤ 1.2× Pipe", b / pipe, b / pipe <= 1.2, "×")
        row(f"blocking, {t}: ≥ 5× faster than grpcio unary", grpc_u / b, grpc_u / b >= 5, "×")
    for t in ("child", "unix", "tcp"):
        a = by[("hubwire asyncio", t)]
        row(f"asyncio, one call in flight, {t}: ≤ 1.5× Pipe", a["p50_us"] / pipe, a["p50_us"] / pipe <= 1.5, "×")
        row(f"asyncio pipelined, {t}: ≥ 100 k calls/s", a["calls_per_s"] / 1000, a["calls_per_s"] >= 100_000, " k/s")
        row(f"asyncio pipelined, {t}: ≥ 3× grpcio bidi msgs/s", a["calls_per_s"] / grpc_b, a["calls_per_s"] >= 3 * grpc_b, "×")
    for t in ("child", "unix", "tcp"):
        for api in ("blocking", "asyncio"):
            m = by[(f"hubwire {api}", t)]["bulk_mb_s"]
            row(f"1 MiB raw, {api}, {t}: ≥ 70 % of the floor", 100 * m / floor, m >= 0.7 * floor, " %")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: check that every row runs")
    ap.add_argument("--readme", action="append", default=[], help="rewrite the results section of this README (may be repeated)")
    ap.add_argument("--json", help="write the results as JSON here")
    ap.add_argument("--only", help="run only rows whose name contains this")
    ap.add_argument("--no-pin", action="store_true", help="leave CPU placement to the scheduler")
    args = ap.parse_args()
    budget = Budget(args.smoke)
    pinned = ""
    if not args.no_pin and hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) >= 2:
        # The client on one CPU, every server on another, set before any
        # thread starts: each round trip then crosses CPUs, as between two
        # busy processes, instead of depending on where the scheduler put
        # each server (on one CPU a round trip is a context switch, across
        # two it is a wake-up of the other CPU: on this kind of machine the
        # same Pipe round trip takes ~14 or ~55 µs).
        cpus = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpus[0]})
        os.environ["HUBWIRE_BENCH_CPU"] = str(cpus[1])
        pinned = f" Client pinned to CPU {cpus[0]}, every server to CPU {cpus[1]}."
    chosen = [r for r in rows() if not args.only or args.only in f"{r.name} {r.transport}"]
    global SOCK_DIR
    SOCK_DIR = tempfile.mkdtemp(prefix="hubwire-pybench-")
    # Every server runs at once and the measurements go round the rows in
    # turns, so that a burst of other work on the machine falls on every
    # row alike rather than on whichever ran then.
    started: list[Row] = []
    try:
        # grpcio's threads make every later fork() warn: start its servers last.
        for row in sorted(chosen, key=lambda r: isinstance(r, GrpcRow)):
            row.start()
            started.append(row)
            for _ in range(budget.warm):
                row.call(SMALL)
            row.call(BULK)
        acc: dict[int, dict[str, Any]] = {id(r): {"lat": [], "cpu": 0.0, "n": 0, "count": 0.0, "pt": 0.0, "bt": 0.0, "bn": 0} for r in chosen}
        for _ in range(budget.rounds):
            for row in chosen:
                a = acc[id(row)]
                lat, cpu = row.rtt(budget.rtt // budget.rounds)
                a["lat"] += lat
                a["cpu"] += cpu
                a["n"] += len(lat)
        for _ in range(budget.rounds):
            for row in chosen:
                a = acc[id(row)]
                try:
                    rate = row.pipelined(budget.pipe_seconds / budget.rounds)
                    a["count"] += rate * budget.pipe_seconds / budget.rounds
                    a["pt"] += budget.pipe_seconds / budget.rounds
                except NotImplementedError:
                    pass
                a["bt"] += row.bulk(max(1, budget.bulk // budget.rounds))
                a["bn"] += max(1, budget.bulk // budget.rounds)
    finally:
        for row in started:
            try:
                row.stop()
            except Exception as e:  # stopping must not hide why we stop
                print(f"stopping {row.name} {row.transport}: {e!r}", file=sys.stderr)
        shutil.rmtree(SOCK_DIR, ignore_errors=True)
    results = []
    for row in chosen:
        a = acc[id(row)]
        r = {"name": row.name, "transport": row.transport, "p50_us": percentile(a["lat"], 0.5) * 1e6, "p99_us": percentile(a["lat"], 0.99) * 1e6,
             "calls_per_s": a["count"] / a["pt"] if a["pt"] else None, "bulk_mb_s": a["bn"] * len(BULK) / a["bt"] / 1e6,
             "cpu_us_per_call": a["cpu"] / a["n"] * 1e6}
        results.append(r)
        print(f"{r['name']:<28} {r['transport']:<6} p50 {r['p50_us']:8.1f} µs  p99 {r['p99_us']:8.1f} µs  "
              f"pipelined {fmt(r['calls_per_s']):>9}/s  1MiB {r['bulk_mb_s']:7.0f} MB/s  cpu {r['cpu_us_per_call']:6.1f} µs/call", flush=True)
    for r in results:
        assert r["p50_us"] > 0 and r["bulk_mb_s"] > 0 and r["cpu_us_per_call"] >= 0, r
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = f"Machine: {machine()}. Date: {when}.{pinned}\n\n{table(results)}\n"
    if not args.only:
        text += f"\nThe Python SDK's targets (ratios against the baselines of this run):\n\n{targets(results)}\n"
    print()
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": machine(), "date": when, "results": results}, f, indent=1)
    for readme in args.readme:
        with open(readme) as f:
            doc = f.read()
        start, end = "<!-- results:start -->", "<!-- results:end -->"
        i, j = doc.index(start) + len(start), doc.index(end)
        with open(readme, "w") as f:
            f.write(doc[:i] + "\n" + text + doc[j:])


if __name__ == "__main__":
    main()
