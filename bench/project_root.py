#!/usr/bin/env python3
"""The cost of a run is that of what it lints, not of the folder around it (issue 42).

    python bench/project_root.py [--repeat 5] [--tree-files 20000] [--preview] [--src DIR] [--json OUT]

Copies the installed torch's nn/, optim/ and utils/data/ sources (205 files
with torch 2.13.0; torch is located, never imported) into a folder `DIR` in
two places under a fresh temporary folder (no pyproject.toml, setup.py,
setup.cfg or .git above it; checked):

  alone   alone/work/DIR, nothing else under alone/
  tree    tree/work/DIR, beside `--tree-files` generated Python files in
          tree/work/other/ (folders of 100 files, some of them packages),
          each importing names the linted files' modules bear (`from module
          import Module`, `import functional`, `from torch.nn import init`:
          what an importer search reads and parses before it can tell they
          import something else)

and runs `python -m torchlint check DIR -j1 --exit-zero --output-format
concise` from `work/` (as a user in that working folder would), cold
(`--no-cache`) and warm (a rerun with the cache of a priming run), alone and
in the tree alternately, `--repeat` times each. CPU seconds are the children's
user+sys (`resource.getrusage(RUSAGE_CHILDREN)` before and after each run), so
other work on a shared machine disturbs them less than wall time; each row is
the median. The targets (issue 42): tree / alone <= 1.15 cold, <= 1.05 warm.

`--src DIR` runs another checkout's torchlint (put first on PYTHONPATH), to
compare with the code before a change; `--preview` runs every rule.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("pyproject.toml", "setup.py", "setup.cfg", ".git")
TARGETS = {"cold": 1.15, "warm": 1.05}
# What a generated file of the tree imports: the words of the linted modules, other modules' names.
IMPORTS = (
    "from module import Module\n",
    "import functional as F\n",
    "from torch.nn import init\n",
    "from .linear import Linear\n",
    "from dataloader import DataLoader\n",
    "from optimizer import Optimizer\n",
    "import sampler\n",
    "from loss import MSELoss\n",
    "from . import conv\n",
    "from utils import helpers\n",
)


def torch_sources() -> List[Path]:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("torch is not installed in this Python (it is only located, never imported)")
    return [Path(list(spec.submodule_search_locations)[0])]


def copy_linted(dest: Path) -> int:
    """torch's nn/, optim/, utils/data/ under dest/torch/; the number of .py files."""
    (torch,) = torch_sources()
    count = 0
    for sub in ("nn", "optim", "utils/data"):
        for src in sorted((torch / sub).rglob("*.py")):
            target = dest / "torch" / src.relative_to(torch)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            count += 1
    return count


def generate_tree(dest: Path, files: int) -> None:
    """`files` Python files in folders of 100 under dest/ (every fourth folder a package)."""
    for k in range(files):
        folder = dest / f"p{k // 100:04d}"
        if k % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
            if (k // 100) % 4 == 0:
                (folder / "__init__.py").write_text("", encoding="utf-8")
        text = (
            f'"""Generated file {k}."""\n'
            "import os\n"
            + IMPORTS[k % len(IMPORTS)]
            + IMPORTS[(k * 7 + 3) % len(IMPORTS)]
            + f"\n\ndef f{k}(x):\n    return os.path.join(str(x), '{k}')\n\n\nclass C{k}:\n    n = {k}\n"
        )
        (folder / f"m{k:05d}.py").write_text(text, encoding="utf-8")


def marker_above(path: Path) -> Optional[Path]:
    for folder in (path, *path.parents):
        for name in MARKERS:
            if os.path.lexists(folder / name):
                return folder / name
    return None


def cpu_of(cmd: Sequence[str], cwd: Path, env: Dict[str, str]) -> float:
    """The children's user+sys CPU seconds one run of `cmd` cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(list(cmd), cwd=str(cwd), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} (in {cwd}) exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each kind (the median is kept)")
    parser.add_argument("--tree-files", type=int, default=20000, help="generated files around the linted folder")
    parser.add_argument("--preview", action="store_true", help="every rule, preview included")
    parser.add_argument("--src", help="a torchlint checkout to run instead of this one")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--keep", help="build the folders here (kept) instead of a temporary folder")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (args.src or str(REPO), env.get("PYTHONPATH", "")) if p)
    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="torchlint-root-bench-"))
    try:
        found = marker_above(tmp)
        if found is not None:
            raise SystemExit(f"{found} lies above {tmp}: pick a folder with no project marker above (--keep)")
        places = {"alone": tmp / "alone" / "work", "tree": tmp / "tree" / "work"}
        started = time.perf_counter()
        for work in places.values():
            if not (work / "DIR").is_dir():
                copy_linted(work / "DIR")
        if not (places["tree"] / "other").is_dir():
            generate_tree(places["tree"] / "other", args.tree_files)
        n = sum(1 for _ in (places["alone"] / "DIR").rglob("*.py"))
        print(f"{n} linted files, {args.tree_files:,} around them in the tree ({time.perf_counter() - started:.0f} s)")
        cmd = [sys.executable, "-m", "torchlint", "check", "DIR", "-j1", "--exit-zero", "--output-format", "concise"]
        if args.preview:
            cmd.append("--preview")
        cpu: Dict[str, List[float]] = {f"{kind} {place}": [] for kind in ("cold", "warm") for place in places}
        for _ in range(args.repeat):
            for place, work in places.items():
                cpu[f"cold {place}"].append(cpu_of(cmd + ["--no-cache"], work, env))
        for work in places.values():
            shutil.rmtree(work / ".torchlint_cache", ignore_errors=True)
            cpu_of(cmd, work, env)  # primes the cache
        for _ in range(args.repeat):
            for place, work in places.items():
                cpu[f"warm {place}"].append(cpu_of(cmd, work, env))
        out: Dict[str, object] = {"files": n, "tree_files": args.tree_files, "repeat": args.repeat, "runs": cpu}
        print(f"CPU seconds, median of {args.repeat} (range); load average {os.getloadavg()[0]:.1f}")
        for kind in ("cold", "warm"):
            alone, tree = (statistics.median(cpu[f"{kind} {p}"]) for p in places)
            ratio = tree / alone
            out[f"{kind}_ratio"] = ratio
            met = "met" if ratio <= TARGETS[kind] else "NOT met"
            spans = ", ".join(f"{p} {min(cpu[f'{kind} {p}']):.2f}-{max(cpu[f'{kind} {p}']):.2f}" for p in places)
            print(
                f"  {kind}: alone {alone:.2f} s, in the tree {tree:.2f} s: {ratio:.3f}x "
                f"(target <= {TARGETS[kind]}: {met}; {spans})"
            )
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1), encoding="utf-8")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
