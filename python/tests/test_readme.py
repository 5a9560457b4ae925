"""The examples of python/README.md run: a block starting ``# NAME.py`` is
saved as that file; every other Python block runs as a script beside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_the_readme_has_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, tmp_path: Path) -> None:
    for block in BLOCKS:
        first = block.split("\n", 1)[0]
        if re.fullmatch(r"# \w+\.py", first):
            (tmp_path / first[2:]).write_text(block)
    code = BLOCKS[index]
    first = code.split("\n", 1)[0]
    if re.fullmatch(r"# \w+\.py", first):
        code = f"import {first[2:-3]}\n"  # a module: it must import cleanly
    script = tmp_path / f"example_{index}.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
