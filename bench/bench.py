#!/usr/bin/env python3
"""torchlint benchmark: one run, the same files, every contender.

Run from the repository root of a fresh clone (Python >= 3.9 with torchlint's
dependencies and torch installed; torch is never imported, only located):

    python bench/bench.py

Options: --repeat N (best of N, default 1), --json FILE (write the results),
--no-torchfix (skip installing/running TorchFix), --preview (every torchlint
run with every rule, preview included: the analysis' whole cost; the default
runs only the stable rules, and a file none of them may report on is only
syntax-checked). torchlint is driven through
its CLI, `python -m torchlint check ...`, from this checkout.

For each file set (the installed torch's nn/, optim/, utils/data/ sources, and
examples/ when present) it times, each as its own subprocess (so interpreter
start-up is included, as a user would see it):

  parse      bare `libcst.parse_module` of every file (the floor)
  cold -j1   `torchlint check --no-cache -j1 --exit-zero --output-format concise`
  cold -jN   the same on all cores (no -j)
  warm       a rerun with the cache after a priming run, nothing changed
             (best of at least 3)
  torchfix   TorchFix 0.7.0 with -j 1 and with its default (all cores),
             installed by this script into its own venv
             (/tmp/torchlint-bench-torchfix); "unavailable" if that fails

and prints wall seconds, lines/s, CPU seconds (user+sys of the run and the
workers it waited for), ratios against the targets of issue 8 (wall clock, as
the targets are stated; CPU-time ratios too, which hold up on a busy machine),
and the peak resident memory of each run (its largest process, via wait4).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
TORCHFIX_VENV = Path(tempfile.gettempdir()) / "torchlint-bench-torchfix"
TORCHFIX_VERSION = "0.7.0"

TARGETS = {
    "cold_vs_parse": 2.0,  # cold -j1 time <= 2x bare parse
    "torchfix_vs_cold": 5.0,  # TorchFix time >= 5x cold -j1
    "j1_vs_jn": 1.6,  # cold -j1 >= 1.6x cold all cores (2 cores)
    "cold_vs_warm": 20.0,  # cold -j1 >= 20x warm
    "peak_mb": 300.0,  # cold -j1 peak RSS on the 72k-line set
}


# -- file sets ---------------------------------------------------------------


def torch_sources() -> Optional[List[Path]]:
    """torch's nn/, optim/, utils/data/ .py files, located without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    files: List[Path] = []
    for sub in ("nn", "optim", "utils/data"):
        files += sorted((root / sub).rglob("*.py"))
    return files


def example_sources() -> Optional[List[Path]]:
    folder = REPO / "examples"
    files = sorted(folder.rglob("*.py")) if folder.is_dir() else []
    return files or None


def count_lines(files: Sequence[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in files)


# -- running -----------------------------------------------------------------


def run_measured(
    cmd: Sequence[str], cwd: Optional[Path] = None, env: Optional[dict] = None
) -> Tuple[float, float, int, str, float]:
    """(wall seconds, peak RSS MiB of the largest process, exit code, stderr tail,
    CPU seconds of the process and the children it waited for)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd), cwd=str(cwd) if cwd else None, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    stderr = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status
    maxrss = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    cpu = usage.ru_utime + usage.ru_stime
    return wall, maxrss, proc.returncode, stderr.decode(errors="replace")[-2000:], cpu


def best_of(n: int, cmd, cwd=None, env=None, before=None) -> Dict[str, object]:
    best = None
    for _ in range(max(1, n)):
        if before:
            before()
        wall, rss, rc, err, cpu = run_measured(cmd, cwd, env)
        if best is None or wall < best["wall_s"]:
            best = {"wall_s": wall, "cpu_s": cpu, "peak_mb": rss, "rc": rc, "stderr": err}
    return best


def file_list_arg(files: Sequence[Path], workdir: Path) -> Path:
    lst = workdir / "files.txt"
    lst.write_text("\n".join(str(p) for p in files) + "\n", encoding="utf-8")
    return lst


PARSE_SNIPPET = (
    "import sys, libcst\n"
    "for p in open(sys.argv[1], encoding='utf-8').read().split('\\n'):\n"
    "    if p:\n"
    "        libcst.parse_module(open(p, 'rb').read().decode('utf-8'))\n"
)


def torchlint_cmd(
    python: str, files: Sequence[Path], jobs: Optional[int], cache: bool, preview: bool = False
) -> List[str]:
    cmd = [python, "-m", "torchlint", "check", "--exit-zero", "--output-format", "concise"]
    if preview:
        cmd.append("--preview")
    if not cache:
        cmd.append("--no-cache")
    if jobs is not None:
        cmd += ["-j", str(jobs)]
    return cmd + [str(p) for p in files]


def ensure_torchfix(python: str) -> Optional[Path]:
    """The torchfix executable in its own venv, or None."""
    exe = TORCHFIX_VENV / ("Scripts" if os.name == "nt" else "bin") / "torchfix"
    vpy = TORCHFIX_VENV / ("Scripts" if os.name == "nt" else "bin") / "python"
    try:
        if exe.exists():
            out = subprocess.run([str(vpy), "-m", "pip", "show", "torchfix"], capture_output=True, text=True)
            if f"Version: {TORCHFIX_VERSION}" in out.stdout:
                return exe
        subprocess.run(
            [python, "-m", "venv", "--clear", str(TORCHFIX_VENV)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=300,
        )
        subprocess.run(
            [str(vpy), "-m", "pip", "install", "-q", f"torchfix=={TORCHFIX_VERSION}"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=900,
        )
        return exe if exe.exists() else None
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        print(f"  torchfix: unavailable ({type(exc).__name__})", file=sys.stderr)
        return None


# -- the benchmark -------------------------------------------------------------


def bench_set(name: str, files: List[Path], args, torchfix: Optional[Path]) -> Dict[str, object]:
    python = sys.executable
    lines = count_lines(files)
    rules = "every rule (--preview)" if args.preview else "default rules"
    print(f"\n== {name}: {len(files)} files, {lines} lines (cores: {os.cpu_count()}; torchlint: {rules})")
    work = Path(tempfile.mkdtemp(prefix="torchlint-bench-"))
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    results: Dict[str, object] = {"files": len(files), "lines": lines}
    try:
        lst = file_list_arg(files, work)
        runs = {
            "parse": ([python, "-c", PARSE_SNIPPET, str(lst)], None),
            "cold_j1": (torchlint_cmd(python, files, 1, cache=False, preview=args.preview), None),
            "cold_jn": (torchlint_cmd(python, files, None, cache=False, preview=args.preview), None),
        }
        for key, (cmd, _) in runs.items():
            results[key] = best_of(args.repeat, cmd, cwd=work, env=env)
        cache_dir = work / ".torchlint_cache"
        warm_cmd = torchlint_cmd(python, files, None, cache=True, preview=args.preview)
        shutil.rmtree(cache_dir, ignore_errors=True)
        results["prime"] = best_of(1, warm_cmd, cwd=work, env=env)
        # Warm runs are short, so scheduling noise weighs most: best of at least 3.
        results["warm"] = best_of(max(3, args.repeat), warm_cmd, cwd=work, env=env)
        if torchfix is not None:
            results["torchfix_j1"] = best_of(1, [str(torchfix), "-j", "1"] + [str(p) for p in files], cwd=work)
            results["torchfix"] = best_of(1, [str(torchfix)] + [str(p) for p in files], cwd=work)
        else:
            results["torchfix_j1"] = results["torchfix"] = "unavailable"
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(name, results, lines)
    return results


def report(name: str, r: Dict[str, object], lines: int) -> None:
    def row(label, key):
        v = r.get(key)
        if not isinstance(v, dict):
            print(f"  {label:<26} {'unavailable':>9}")
            return
        bad = (
            f"  (exit {v['rc']}: {v['stderr'].strip().splitlines()[-1] if v['stderr'].strip() else ''})"
            if v["rc"] not in (0, 1)
            else ""
        )
        print(
            f"  {label:<26} {v['wall_s']:8.2f} s {lines / v['wall_s']:9.0f} lines/s  cpu {v['cpu_s']:7.2f} s"
            f"  peak {v['peak_mb']:6.0f} MB{bad}"
        )

    row("bare LibCST parse", "parse")
    row("torchlint -j1, cold", "cold_j1")
    row("torchlint all cores", "cold_jn")
    row("torchlint warm cache", "warm")
    row(f"TorchFix {TORCHFIX_VERSION} -j1", "torchfix_j1")
    row(f"TorchFix {TORCHFIX_VERSION} all cores", "torchfix")

    def t(key):
        v = r.get(key)
        return v["wall_s"] if isinstance(v, dict) else None

    checks = []
    if t("parse") and t("cold_j1"):
        checks.append(("cold -j1 / parse", t("cold_j1") / t("parse"), "<=", TARGETS["cold_vs_parse"]))
    if t("torchfix_j1") and t("cold_j1"):
        checks.append(("TorchFix -j1 / cold -j1", t("torchfix_j1") / t("cold_j1"), ">=", TARGETS["torchfix_vs_cold"]))
    if t("torchfix") and t("cold_jn"):
        checks.append(("TorchFix / all cores", t("torchfix") / t("cold_jn"), ">=", TARGETS["torchfix_vs_cold"]))
    if t("cold_j1") and t("cold_jn"):
        checks.append(("cold -j1 / all cores", t("cold_j1") / t("cold_jn"), ">=", TARGETS["j1_vs_jn"]))
    if t("cold_j1") and t("warm"):
        checks.append(("cold -j1 / warm", t("cold_j1") / t("warm"), ">=", TARGETS["cold_vs_warm"]))
    if isinstance(r.get("cold_j1"), dict):
        checks.append(("peak MB, cold -j1", r["cold_j1"]["peak_mb"], "<=", TARGETS["peak_mb"]))
    if t("parse") and t("cold_j1"):  # CPU time is robust to other load on the machine
        checks.append(
            ("cpu: cold -j1 / parse", r["cold_j1"]["cpu_s"] / r["parse"]["cpu_s"], "<=", TARGETS["cold_vs_parse"])
        )
    if t("warm") and t("cold_j1"):
        checks.append(
            (
                "cpu: cold -j1 / warm",
                r["cold_j1"]["cpu_s"] / max(r["warm"]["cpu_s"], 1e-3),
                ">=",
                TARGETS["cold_vs_warm"],
            )
        )
    for label, value, op, target in checks:
        ok = value <= target if op == "<=" else value >= target
        print(f"  {label:<26} {value:8.2f}   target {op} {target:<6} {'met' if ok else 'NOT met'}")
    r["checks"] = [{"name": c[0], "value": c[1], "op": c[2], "target": c[3]} for c in checks]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--no-torchfix", action="store_true")
    ap.add_argument("--preview", action="store_true", help="run torchlint with every rule, preview included")
    args = ap.parse_args(argv)
    sets = []
    torch_files = torch_sources()
    if torch_files:
        sets.append(("torch nn/ optim/ utils/data/", torch_files))
    else:
        print("torch is not installed: skipping the torch source set", file=sys.stderr)
    ex = example_sources()
    if ex:
        sets.append(("examples/", ex))
    torchfix = None if args.no_torchfix else ensure_torchfix(sys.executable)
    print(
        f"python {sys.version.split()[0]}, {sys.platform}, {os.cpu_count()} cores, "
        f"torchfix: {torchfix or 'unavailable'}"
    )
    all_results = {name: bench_set(name, files, args, torchfix) for name, files in sets}
    if args.json:
        args.json.write_text(json.dumps(all_results, indent=2, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
