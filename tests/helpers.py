"""Shared snippets, notebook builders and sample sources for the core tests."""

import functools
import inspect
import json
import textwrap
import types
from pathlib import Path
from typing import Dict, List, Tuple

from bench._training_script import generate as _generate_training_script
from torchlint import api as _api
from torchlint.config import Settings

ROOT = Path(__file__).resolve().parents[1]

TL104_SRC = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n"
TL104_FIXED = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3, device=device)\n"
# TL501 whose fix is unsafe (the result is used beyond key_averages/export_chrome_trace).
UNSAFE_SRC = "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n    run()\nevents = prof.function_events\n"
CLEAN_SRC = "import torch\nx = torch.zeros(3, device='cuda')\n"
BAD_SYNTAX = "def f(:\n    pass\n"

# Every rule, preview ones included: what the rule tests exercise.
EVERY_RULE = Settings(preview=True)


def _with_every_rule(fn):
    """`fn` (a torchlint.api function with a `settings` parameter) with every
    rule on when the caller gives no settings."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        if bound.arguments.get("settings") is None:
            bound.arguments["settings"] = EVERY_RULE
        return fn(*bound.args, **bound.kwargs)

    return wrapped


# torchlint.api with every rule on by default: `from helpers import api` or its functions.
api = types.SimpleNamespace(
    **{
        name: _with_every_rule(getattr(_api, name))
        if "settings" in inspect.signature(getattr(_api, name)).parameters
        else getattr(_api, name)
        for name in _api.__all__
        if callable(getattr(_api, name)) and not isinstance(getattr(_api, name), type)
    }
)
check = api.check
lint_source = api.lint_source
fix_source = api.fix_source
lint_bytes = api.lint_bytes
fix_bytes = api.fix_bytes
process_bytes = api.process_bytes
lint_paths = api.lint_paths
run = api.run
decode_source = _api.decode_source


def lint_in_project(root: Path, files: Dict[str, str], target: str) -> list:
    """The findings of file `target` of `files`, written under `root` and linted
    with the project index of all of them (every rule on)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    index = api.project_index([str(root)])
    return lint_source(files[target], str(root / target), project=index)


def code(source, count=None, outputs=(), metadata=None) -> dict:
    """A notebook code cell; `source` is a string or a list of lines."""
    return {
        "cell_type": "code",
        "execution_count": count,
        "metadata": metadata or {},
        "outputs": list(outputs),
        "source": source,
    }


def notebook(*cells, indent=1) -> bytes:
    """An nbformat 4 Python notebook file holding `cells`."""
    nb = {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python", "version": "3.11.4"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return (json.dumps(nb, indent=indent, ensure_ascii=False) + "\n").encode("utf-8")


def training_script(lines: int = 120) -> str:
    """A generated, realistic training script (bench/_training_script.py)."""
    return _generate_training_script(lines)


def repo_sources() -> List[Tuple[str, str]]:
    """(name, text) of real-looking PyTorch code kept in this repository: the
    fixtures, the examples and a generated training script."""
    out = []
    for folder in (ROOT / "fixtures", ROOT / "examples"):
        out += [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in sorted(folder.rglob("*.py"))]
    out.append(("training_script.py", training_script(120)))
    return out


def run_fixed_pair(tmp_path: Path, source: str, name: str = "script.py"):
    """(fixed text, stdout of the original, stdout of the fixed script): `source`
    fixed with unsafe fixes on, then both run with torch on the CPU."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    fixed, _ = fix_source(source, name, unsafe=True)
    outputs = []
    for folder, text in (("before", source), ("after", fixed)):
        path = tmp_path / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, f"{path} failed:\n{proc.stderr[-3000:]}"
        outputs.append("\n".join(line for line in proc.stdout.splitlines() if not line.startswith("USDT:")))
    return fixed, outputs[0], outputs[1]


def write_files(root: Path, files: Dict[str, str]) -> None:
    """Write each `name: source` under `root` (folders made, sources dedented)."""
    for name, src in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(src).lstrip("\n"), encoding="utf-8")
