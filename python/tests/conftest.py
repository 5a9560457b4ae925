"""Fixtures shared by the test modules."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest


@pytest.fixture
def sock_dir() -> Iterator[str]:
    """A fresh directory for a test's Unix sockets, removed when the test
    ends, passed or failed (a socket file is of no use afterwards)."""
    d = tempfile.mkdtemp(prefix="hw-sock-")
    yield d
    shutil.rmtree(d, ignore_errors=True)
