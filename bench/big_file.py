#!/usr/bin/env python3
"""The big-file benchmark: one generated 30,000-line training script with about
12,000 fixable findings, linted and fixed through the CLI.

    python bench/big_file.py                 # generate, lint, fix; print the times
    python bench/big_file.py --lines 6000    # a smaller file
    python bench/big_file.py --write big.py  # only write the file

The file is deterministic: a script of many functions, each a training loop
over a DataLoader with the model moved to a device, holding the mistakes the
rules fix (TL104 `torch.randn(n).to(device)`, TL105 a discarded `x.cuda()`,
TL103 a batch not moved, TL302/TL303 loader settings, TL401 `.item()` in the
loop, TL501 the legacy profiler). Each timing is its own subprocess,
`python -m torchlint check --no-cache -j1 ...`, interpreter start-up included:

  lint   --exit-zero --output-format concise FILE
  fix    --fix --unsafe-fixes --exit-zero FILE   (on a copy)

Targets (issue "fixes at a cost linear in the file"): lint under 60 s, fix
under 120 s on the project's 2-core development machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]
TARGETS = {"lint_s": 60.0, "fix_s": 120.0}

HEADER = '''"""Train many small models, one function per experiment (generated for benchmarks)."""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

'''

BLOCK = """
def train_{i}(model: nn.Module, dataset, epochs: int = 3) -> float:
    model = model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    noise = torch.randn(64, {dim}).to(device)
    scale = torch.ones({dim}).to(device)
    bias = torch.zeros({dim}).cuda()
    mask = torch.rand(64, {dim}).to(device)
    best = math.inf
    for epoch in range(epochs):
        total = 0.0
        for x, y in loader:
            noise.cuda()
            out = model(x * scale + bias + noise[: x.shape[0]] * mask[: x.shape[0]])
            loss = F.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
        best = min(best, total)
    with torch.autograd.profiler.profile(use_cuda=True) as prof:
        model(noise)
    print(prof.key_averages().table())
    return best
"""


def generate(lines: int = 30_000) -> str:
    """A training script of at least `lines` lines (about 0.4 findings per line)."""
    parts: List[str] = [HEADER]
    count = HEADER.count("\n")
    i = 0
    while count < lines:
        block = BLOCK.format(i=i, dim=16 + 8 * (i % 5))
        parts.append(block)
        count += block.count("\n")
        i += 1
    return "".join(parts)


def _cli(args: List[str]) -> Dict[str, object]:
    cmd = [sys.executable, "-m", "torchlint", "check", "--no-cache", "-j1", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr}")
    return {"seconds": seconds, "stdout": proc.stdout, "stderr": proc.stderr}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=30_000)
    parser.add_argument("--write", metavar="PATH", help="write the generated file there and stop")
    parser.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = parser.parse_args(argv)
    source = generate(args.lines)
    if args.write:
        Path(args.write).write_text(source, encoding="utf-8")
        return 0
    work = Path(tempfile.mkdtemp(prefix="torchlint-big-"))
    try:
        path = work / "big_training.py"
        path.write_text(source, encoding="utf-8")
        lint = _cli(["--exit-zero", "--output-format", "concise", str(path)])
        found = re.search(r"^Found (\d+) errors?\.", str(lint["stdout"]), re.M)
        fixable = len(re.findall(r": TL\d+ \[\*\]", str(lint["stdout"])))
        stats = _cli(["--exit-zero", "--statistics", "--unsafe-fixes", str(path)])
        fix = _cli(["--fix", "--unsafe-fixes", "--exit-zero", str(path)])
        summary = re.search(r"^Found .*$", str(fix["stdout"]), re.M)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    numbers = {
        "lines": source.count("\n"),
        "findings": int(found.group(1)) if found else 0,
        "safe_fixable": fixable,
        "lint_s": round(float(lint["seconds"]), 2),
        "fix_s": round(float(fix["seconds"]), 2),
        "fix_summary": summary.group(0) if summary else "",
    }
    print(f"big file: {numbers['lines']:,} lines, {numbers['findings']:,} findings ({fixable:,} safe fixes)")
    print(str(stats["stdout"]).rstrip())
    for key in ("lint_s", "fix_s"):
        met = "met" if float(numbers[key]) <= TARGETS[key] else "NOT met"
        print(f"{key[:-2]:5} {float(numbers[key]):8.2f} s   target <= {TARGETS[key]:.0f} s: {met}")
    print(f"fix summary: {numbers['fix_summary']}")
    if args.json:
        Path(args.json).write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
