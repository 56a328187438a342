#!/usr/bin/env python3
"""The runtime oracle for the static analysis: every runnable script and
notebook given is run with `torchlint run --compare` on the simulated GPU,
and the static findings it confirmed, contradicted or never reached, and the
observations no static finding matched, are counted per rule.

    python bench/oracle.py fixtures examples --out ../oracle-work/oracle
    python bench/oracle.py ../pool/owner__repo --timeout 60 --steps 20 --jobs 2 --budget 900

Each file (`.py` scripts with a `__main__` guard or top-level statements
beyond imports and definitions, and `.ipynb` notebooks; folders are searched)
runs in a fresh process, with its own folder as the current folder, as

    torchlint run --compare-output FILE --fake-data --timeout T --steps N --output-format json -o REPORT FILE

with one thread (OMP/MKL), matplotlib off screen, and TORCHLINT_SMOKE=1 with
TORCHLINT_SMOKE_DEVICE=cuda (fixture scripts at their smoke sizes, on the
simulated GPU). A file that fails or exits before its first step (missing
data, modules, arguments, network) is **not runnable**, with its reason (the
first line of the error; a script that imports at its top level a module
neither installed nor beside it is listed so without being run); a run
stopped by `--steps` or `--timeout`, or that raised after some steps, counts
with what it ran. Files are taken in turn from each path given, so that
`--budget` (no run starts after it) spreads over them.

Per rule: the static findings **confirmed**, **contradicted** and **not
reached**; the runtime observations (the reported ones), those a static
finding matched (**also static**) and the **runtime-only** ones; precision
is confirmed / (confirmed + contradicted), and the share of the runtime
observations that are also static findings is also static / observations.
`--out DIR` writes `oracle.json` (the files, their reasons, every finding and
observation by kind) and `oracle.md` (the table); the table is printed.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Set

KINDS = ("confirmed", "contradicted", "not_reached", "runtime_only")
_SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", "site-packages", "node_modules", ".ipynb_checkpoints"}
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class FileResult:
    path: str
    runnable: bool
    reason: str = ""  # why not runnable, or how the run ended
    status: str = ""
    steps: int = 0
    seconds: float = 0.0
    document: Dict[str, Any] = field(default_factory=dict)  # `run --compare-output`'s JSON


# -- which files -----------------------------------------------------------


def is_script(path: Path) -> bool:
    """A `.py` file that does something when run: a `__main__` guard, or a
    top-level statement other than imports, definitions, assignments and a docstring."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, _DEFINITIONS) or isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        return True
    return False


def candidates(paths: Iterable[Path]) -> List[Path]:
    """The scripts and notebooks under `paths`, each once, taken in turn from
    each path given (its first file, then each one's second...), so that a
    `--budget` spreads over them."""
    groups: List[List[Path]] = []
    seen: Set[Path] = set()
    for root in paths:
        if root.is_file():
            found = [root]
        else:
            found = []
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
                found += [Path(folder) / f for f in sorted(files)]
        group = []
        for path in found:
            if path.suffix == ".ipynb" or (path.suffix == ".py" and is_script(path)):
                resolved = path.resolve()
                if resolved not in seen:
                    seen.add(resolved)
                    group.append(resolved)
        groups.append(group)
    return [p for turn in itertools.zip_longest(*groups) for p in turn if p is not None]


def missing_module(path: Path, roots: Sequence[Path]) -> Optional[str]:
    """The first module a script imports at its top level (outside `try`) that is
    neither installed nor beside it (in its folder, a folder above it, or a
    folder given): the ModuleNotFoundError its run would end with, found
    without running it."""
    if path.suffix != ".py":
        return None
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError):
        return None
    folders = [*path.parents, *(r for r in roots if r.is_dir())]
    for node in tree.body:
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module.split(".")[0]]
        else:
            continue
        for name in names:
            if any((f / f"{name}.py").is_file() or (f / name).is_dir() for f in folders):
                continue
            if importlib.util.find_spec(name) is None:
                return name
    return None


# -- running one ---------------------------------------------------------------


def environment(threads: int = 1) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        MPLBACKEND="Agg",
        PYTHONHASHSEED="0",
        TORCHLINT_SMOKE="1",
        TORCHLINT_SMOKE_DEVICE="cuda",
    )
    return env


def _first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:240]
    return ""


def _error_line(stderr: str) -> str:
    """The script's own last words on stderr (argparse's usage error, a warning), not torchlint's."""
    lines = [
        line.strip()
        for line in stderr.splitlines()
        if line.strip() and not line.startswith("torchlint run:") and not line.startswith("  ")
    ]
    return lines[-1][:240] if lines else ""


def judge(path: str, doc: Optional[Dict[str, Any]], returncode: int, stderr: str) -> FileResult:
    """A file's result from `run --compare-output`'s document (None: the run wrote none)."""
    if doc is None:
        return FileResult(path, False, _error_line(stderr) or f"torchlint run exited with {returncode}")
    run = doc["run"]
    status, steps = run["status"], run["steps"]
    if status in ("failed", "exited", "interrupted") and steps == 0:
        error = run.get("error")
        if error:
            reason = f"{error['type']}: {_first_line(error['message'])}".rstrip(": ")
        else:
            reason = f"exited with code {run['exit_code']} before any step: {_error_line(stderr)}".rstrip(": ")
        return FileResult(path, False, reason, status, steps, run.get("seconds", 0.0), doc)
    return FileResult(path, True, status, status, steps, run.get("seconds", 0.0), doc)


def run_one(path: Path, timeout: float, steps: int, threads: int = 1) -> FileResult:
    with tempfile.TemporaryDirectory(prefix="torchlint-oracle-") as scratch:
        doc_path = Path(scratch) / "compare.json"
        cmd = [
            sys.executable,
            "-m",
            "torchlint",
            "run",
            "--compare-output",
            str(doc_path),
            "--fake-data",
            "--timeout",
            str(timeout),
            "--steps",
            str(steps),
            "--output-format",
            "json",
            "-o",
            str(Path(scratch) / "report.json"),
            str(path),
        ]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                cwd=path.parent,
                env=environment(threads),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout + 120,  # the lint of the files that ran, and a run that ignores SIGALRM
            )
        except subprocess.TimeoutExpired:
            return FileResult(str(path), False, f"no report within {timeout + 120:g} s", "killed")
        doc = json.loads(doc_path.read_text(encoding="utf-8")) if doc_path.is_file() else None
        result = judge(str(path), doc, proc.returncode, proc.stderr)
        result.seconds = round(time.perf_counter() - start, 1)
        return result


# -- counting ----------------------------------------------------------------


def _entry(item: Dict[str, Any], root: Optional[str]) -> Dict[str, Any]:
    path = item["path"]
    if root and os.path.isabs(path):
        path = os.path.relpath(path, root)
    out = {"path": path, "cell": item.get("cell"), "row": item["row"]}
    if "reason" in item:
        out["reason"] = item["reason"]
    if "count" in item:
        out["count"] = item["count"]
    return out


def tally(results: Sequence[FileResult], root: Optional[str] = None) -> Dict[str, Dict[str, Any]]:
    """Per rule code: the lists of each kind and the observations, over the runnable files."""
    rules: Dict[str, Dict[str, Any]] = {}

    def rule(code: str) -> Dict[str, Any]:
        return rules.setdefault(code, {**{k: [] for k in KINDS}, "observed": 0, "also_static": 0})

    for r in results:
        if not r.runnable:
            continue
        for kind in KINDS:
            for item in r.document.get(kind, ()):
                rule(item["code"])[kind].append(_entry(item, root))
        for o in r.document.get("observed", ()):
            entry = rule(o["code"])
            entry["observed"] += 1
            entry["also_static"] += 1 if o["static"] else 0
    return dict(sorted(rules.items()))


def totals(rules: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    t: Dict[str, Any] = {k: sum(len(v[k]) for v in rules.values()) for k in KINDS}
    t["observed"] = sum(v["observed"] for v in rules.values())
    t["also_static"] = sum(v["also_static"] for v in rules.values())
    t["precision"] = _share(t["confirmed"], t["confirmed"] + t["contradicted"])
    t["also_static_share"] = _share(t["also_static"], t["observed"])
    return t


def _share(part: int, whole: int) -> Optional[float]:
    return round(part / whole, 3) if whole else None


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def markdown(results: Sequence[FileResult], rules: Dict[str, Dict[str, Any]], root: Optional[str] = None) -> str:
    def rel(p: str) -> str:
        return os.path.relpath(p, root) if root else p

    runnable = [r for r in results if r.runnable]
    out = [
        f"{len(runnable)} of {len(results)} files runnable.",
        "",
        "| rule | confirmed | contradicted | not reached | precision | observations | also static | runtime-only | share also static |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for code, v in rules.items():
        c, x, n = len(v["confirmed"]), len(v["contradicted"]), len(v["not_reached"])
        out.append(
            f"| {code} | {c} | {x} | {n} | {_fmt(_share(c, c + x))} | {v['observed']} | {v['also_static']} "
            f"| {len(v['runtime_only'])} | {_fmt(_share(v['also_static'], v['observed']))} |"
        )
    t = totals(rules)
    out.append(
        f"| **all** | {t['confirmed']} | {t['contradicted']} | {t['not_reached']} | {_fmt(t['precision'])} "
        f"| {t['observed']} | {t['also_static']} | {t['runtime_only']} | **{_fmt(t['also_static_share'])}** |"
    )
    if runnable:
        out += ["", "Runnable: " + ", ".join(f"`{rel(r.path)}` ({r.status}, {r.steps} steps)" for r in runnable) + "."]
    failed = [r for r in results if not r.runnable]
    if failed:
        out += ["", "Not runnable: " + "; ".join(f"`{rel(r.path)}` ({r.reason})" for r in failed) + "."]
    return "\n".join(out) + "\n"


def report(results: Sequence[FileResult], root: Optional[str] = None) -> Dict[str, Any]:
    rules = tally(results, root)

    def rel(p: str) -> str:
        return os.path.relpath(p, root) if root else p

    return {
        "files": [
            {"path": rel(r.path), "runnable": r.runnable, "reason": r.reason, "steps": r.steps, "seconds": r.seconds}
            for r in results
        ],
        "totals": totals(rules),
        "rules": rules,
    }


# -- the command -------------------------------------------------------------


def run_all(
    files: Sequence[Path],
    timeout: float,
    steps: int,
    jobs: int,
    budget: Optional[float],
    roots: Sequence[Path] = (),
) -> List[FileResult]:
    start = time.perf_counter()

    def one(path: Path) -> FileResult:
        missing = missing_module(path, roots)
        if missing is not None:
            return FileResult(str(path), False, f"ModuleNotFoundError: No module named '{missing}' (not run)")
        if budget is not None and time.perf_counter() - start > budget:
            return FileResult(str(path), False, f"not run: the {budget:g} s budget was spent", "skipped")
        result = run_one(path, timeout, steps)
        state = "runnable" if result.runnable else "not runnable"
        print(f"{path}: {state}, {result.reason} ({result.seconds:g} s)", file=sys.stderr, flush=True)
        return result

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, files))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path, help="scripts, notebooks, folders")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per run (torchlint run --timeout)")
    parser.add_argument("--steps", type=int, default=20, help="steps per run (torchlint run --steps)")
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="runs at a time")
    parser.add_argument("--budget", type=float, help="start no run after this many seconds (the rest: not run)")
    parser.add_argument("--root", type=Path, help="paths in the output relative to this folder")
    parser.add_argument("--out", type=Path, help="write oracle.json and oracle.md here")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        parser.error("no such file or folder: " + ", ".join(missing))
    files = candidates(args.paths)
    root = str(args.root.resolve()) if args.root else None
    results = run_all(files, args.timeout, args.steps, args.jobs, args.budget, [p.resolve() for p in args.paths])
    table = markdown(results, tally(results, root), root)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "oracle.md").write_text(table, encoding="utf-8")
        doc = report(results, root)
        (args.out / "oracle.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
