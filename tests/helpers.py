"""Shared snippets, notebook builders and sample sources for the core tests."""

import json
from pathlib import Path
from typing import List, Tuple

from bench._training_script import generate as _generate_training_script

ROOT = Path(__file__).resolve().parents[1]

TL104_SRC = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3).to(device)\n"
TL104_FIXED = "import torch\ndevice = torch.device('cuda')\nx = torch.zeros(3, device=device)\n"
# TL501 whose fix is unsafe (the result is used beyond key_averages/export_chrome_trace).
UNSAFE_SRC = "import torch\nwith torch.autograd.profiler.profile(use_cuda=True) as prof:\n    run()\nevents = prof.function_events\n"
CLEAN_SRC = "import torch\nx = torch.zeros(3, device='cuda')\n"
BAD_SYNTAX = "def f(:\n    pass\n"


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
