"""What only the blocking API has: many threads on one connection (the
leader runs the loop, the others wait and take over), a crash failing
every waiting thread, streams left early."""

from __future__ import annotations

import sys
import threading

import behaviour_provider as bp
import pytest
from harness import PROVIDER

from hubwire import Code, HubwireError, blocking, testing


def test_many_threads_share_one_connection() -> None:
    conn, _pair = testing.blocking_pair(bp.provider(), None, bp.options())
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            for i in range(100):
                assert conn.call("add", [k, i]) == k + i
                if i % 10 == 0:
                    assert list(conn.server_stream("count", 5)) == [0, 1, 2, 3, 4]
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    conn.close()


def test_a_crash_fails_every_waiting_thread() -> None:
    conn = blocking.spawn([sys.executable, PROVIDER], name="behaviour", log=None)
    codes: list[Code] = []
    started = threading.Barrier(6)

    def sleeper(i: int) -> None:
        started.wait()
        try:
            conn.call("sleep", bp.Tagged(token=f"b{i}", n=60_000))
        except HubwireError as e:
            codes.append(e.code)

    threads = [threading.Thread(target=sleeper, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    started.wait()
    assert conn.ping() >= 0  # the REQUESTs went out before the PING
    assert conn.child is not None
    conn.child.kill()
    for t in threads:
        t.join(20)
    assert codes == [Code.unavailable] * 5
    with pytest.raises(HubwireError) as e:
        conn.call_raw("echo", b"")
    assert e.value.code == Code.unavailable
    conn.close()


def test_leaving_a_stream_early_cancels_it() -> None:
    conn, _pair = testing.blocking_pair(bp.provider(), None, bp.options())
    with conn.server_stream("slow_stream", bp.Tagged(token="bs", n=5)) as s:
        for i in s:
            if i == 2:
                break
    for _ in range(1000):
        if conn.call("was_cancelled", "bs") is True:
            break
    else:
        raise AssertionError("cancellation never observed")
    conn.close()


def test_interrupting_a_waiting_thread_cancels_its_call() -> None:
    import os
    import signal

    conn, _pair = testing.blocking_pair(bp.provider(), None, bp.options())
    interrupted = threading.Event()

    def ctrl_c() -> None:
        # Pressed once the handler runs: the call is in flight and the main
        # thread leads the loop.
        while bp.cancelled.get("ki") is None:
            if interrupted.wait(0.01):
                return
        os.kill(os.getpid(), signal.SIGINT)

    # Python leaves SIGINT ignored when it started ignoring it, as a
    # command a non-interactive shell runs in the background does
    # (`make test &`): Ctrl-C's handler is put in place for this test.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    presser = threading.Thread(target=ctrl_c)
    presser.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            conn.call("sleep", bp.Tagged(token="ki", n=60_000))  # the main thread leads: Ctrl-C lands in the loop
    finally:
        interrupted.set()
        presser.join()
        signal.signal(signal.SIGINT, before)
    assert any(conn.call("was_cancelled", "ki") is True for _ in range(1000)), "the handler never saw the CANCEL"
    assert conn.call("add", [1, 2]) == 3  # the connection goes on
    conn.close()
