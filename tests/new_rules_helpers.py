"""Shared by the tests of the rules of issue 31: run a script and its fixed version on the CPU."""

import os
import subprocess
import sys
from pathlib import Path

from helpers import fix_source

ENV = dict(os.environ, CUDA_VISIBLE_DEVICES="")


def run(path: Path) -> str:
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=ENV)
    assert proc.returncode == 0, f"{path} failed:\n{proc.stderr[-3000:]}"
    return "\n".join(line for line in proc.stdout.splitlines() if not line.startswith("USDT:"))


def run_both(tmp_path: Path, source: str, name: str = "script.py"):
    """(fixed text, stdout of the original, stdout of the fixed script), fixed with unsafe fixes on."""
    fixed, _ = fix_source(source, name, unsafe=True)
    before, after = tmp_path / "before" / name, tmp_path / "after" / name
    for path, text in ((before, source), (after, fixed)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return fixed, run(before), run(after)
