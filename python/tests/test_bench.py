"""The bench runs: every row with tiny counts, positive figures (the
figures themselves are the bench's business, not a test's)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "run.py"


def test_every_bench_row_runs() -> None:
    r = subprocess.run([sys.executable, str(BENCH), "--smoke"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    for row in ("socket echo", "multiprocessing.Pipe", "grpcio unary", "grpcio bidi", "hubwire blocking", "hubwire asyncio"):
        assert row in r.stdout
