"""Child-process providers (``spec/PROTOCOL.md`` §10).

The parent makes a connected ``AF_UNIX`` socketpair and starts the child
with one end as descriptor 3 and ``HUBWIRE_FD=3``; the parent dials, the
child accepts. The child's stdin is ``/dev/null``; its stdout and stderr
are pipes the parent reads line by line into log lines, so a stray
``print()`` in a plugin never touches the framing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
from typing import Callable, Sequence

from .sock import SocketTransport

#: The descriptor a child finds the connection on.
CHILD_FD = 3

#: Receives one line of a child's output: (name, "stdout" or "stderr", line).
LogFn = Callable[[str, str, str], None]


def default_log(name: str, stream: str, line: str) -> None:
    """Writes a child's output line to our stderr, tagged."""
    sys.stderr.write(f"[{name} {stream}] {line}\n")


def parent() -> SocketTransport | None:
    """In a child started this way, the connection to the parent (None when
    ``HUBWIRE_FD`` is not set)."""
    fd = os.environ.get("HUBWIRE_FD")
    if fd is None:
        return None
    s = socket.socket(fileno=int(fd))
    return SocketTransport(s, f"parent:fd{fd}")


class Child:
    """A running child process and the transport to it."""

    def __init__(self, transport: SocketTransport, process: asyncio.subprocess.Process, pumps: list[asyncio.Task[None]]) -> None:
        #: The parent's end of the socketpair.
        self.transport = transport
        #: The process.
        self.process = process
        self._pumps = pumps

    async def wait(self, grace: float = 5.0) -> int:
        """Waits until the child exits (and its output is read); its status.
        A child still running after ``grace`` seconds is killed."""
        try:
            code = await asyncio.wait_for(asyncio.shield(self.process.wait()), grace)
        except asyncio.TimeoutError:
            self.kill()
            code = await self.process.wait()
        # Its output ends with it, unless a grandchild holds the pipes: then stop reading.
        _, pending = await asyncio.wait(self._pumps, timeout=grace)
        for p in pending:
            p.cancel()
        return code

    def kill(self) -> None:
        """Kills the child (SIGKILL) if it still runs."""
        if self.process.returncode is None:
            self.process.kill()


def _child_setup(argv: Sequence[str], env: dict[str, str] | None) -> tuple[socket.socket, socket.socket, dict[str, str]]:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    child_env = dict(os.environ if env is None else env)
    child_env["HUBWIRE_FD"] = str(CHILD_FD)
    return ours, theirs, child_env


def _fd3(fd: int) -> dict[str, object]:
    """Popen arguments that put ``fd`` on descriptor 3 in the child."""

    def to_fd3() -> None:  # in the child, between fork and exec: async-signal-safe calls only
        os.dup2(fd, CHILD_FD)

    if fd == CHILD_FD:
        return {"pass_fds": (fd,)}
    return {"pass_fds": (fd, CHILD_FD), "preexec_fn": to_fd3}


async def _pump(stream: asyncio.StreamReader | None, name: str, which: str, log: LogFn) -> None:
    if stream is None:
        return
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # a line over the reader's limit: take what is there
            line = await stream.read(65536)
        if not line:
            return
        log(name, which, line.rstrip(b"\n").decode("utf-8", errors="replace"))


async def spawn(
    argv: Sequence[str],
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    log: LogFn | None = default_log,
) -> Child:
    """Starts ``argv`` with the child's end of a socketpair on descriptor 3."""
    ours, theirs, child_env = _child_setup(argv, env)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=child_env,
            cwd=cwd,
            **_fd3(theirs.fileno()),  # type: ignore[arg-type]
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    label = name or os.path.basename(argv[0])
    logger = log or (lambda *_: None)
    pumps = [asyncio.ensure_future(_pump(proc.stdout, label, "stdout", logger)), asyncio.ensure_future(_pump(proc.stderr, label, "stderr", logger))]
    return Child(SocketTransport(ours, f"child:{label}[{proc.pid}]"), proc, pumps)


class SyncChild:
    """A child process started without an event loop (the blocking API):
    two plain threads read its stdout and stderr into log lines, so a chatty
    child never blocks while nobody runs the connection's loop."""

    def __init__(self, transport: SocketTransport, process: subprocess.Popen[bytes], pumps: list[threading.Thread]) -> None:
        #: The parent's end of the socketpair.
        self.transport = transport
        #: The process.
        self.process = process
        self._pumps = pumps

    def wait(self, grace: float = 5.0) -> int:
        """Waits until the child exits (and its output is read); its status.
        A child still running after ``grace`` seconds is killed."""
        try:
            code = self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.process.wait()
        for p in self._pumps:
            p.join(grace)
        return code

    def kill(self) -> None:
        """Kills the child (SIGKILL) if it still runs."""
        if self.process.poll() is None:
            self.process.kill()


def _pump_sync(stream: object, name: str, which: str, log: LogFn) -> None:
    # Lines are cut at 64 KiB, as the asyncio pump's reader does: a child
    # that never writes a newline costs at most that much memory.
    while line := stream.readline(65536):  # type: ignore[attr-defined]
        log(name, which, line.rstrip(b"\n").decode("utf-8", errors="replace"))


def spawn_sync(
    argv: Sequence[str],
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    log: LogFn | None = default_log,
) -> SyncChild:
    """:func:`spawn` without an event loop."""
    ours, theirs, child_env = _child_setup(argv, env)
    try:
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env, cwd=cwd, **_fd3(theirs.fileno())  # type: ignore[call-overload]
        )
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    label = name or os.path.basename(argv[0])
    logger = log or (lambda *_: None)
    pumps = [
        threading.Thread(target=_pump_sync, args=(proc.stdout, label, "stdout", logger), name=f"hubwire-{label}-stdout", daemon=True),
        threading.Thread(target=_pump_sync, args=(proc.stderr, label, "stderr", logger), name=f"hubwire-{label}-stderr", daemon=True),
    ]
    for p in pumps:
        p.start()
    return SyncChild(SocketTransport(ours, f"child:{label}[{proc.pid}]"), proc, pumps)
