#!/usr/bin/env python3
"""What `torchlint run` costs over running the script plainly.

For each script given (default: the `.py` files of examples/ and every
fixtures/*/{bad,fixed}.py, the fixtures at their smoke sizes through
TORCHLINT_SMOKE=1), the wall time of

- **plain**: `python bench/_plain_run.py SCRIPT` (the script as `python
  SCRIPT` runs it, with Python's, NumPy's and torch's generators seeded to 0
  as `torchlint run` seeds them, so both draw the same data), and
- **run**: `torchlint run --exit-zero SCRIPT` (no `--steps`: both do the
  same work),

each in a fresh process, with the same environment (OMP/MKL threads set to
`--threads`, PYTHONHASHSEED=0, TORCHDYNAMO_DISABLE=1: `torchlint run` makes
`torch.compile` return the model unchanged, so the plain run compiles nothing
either), in a scratch folder as the current folder
(what a script writes lands there), alternately, `--repeat` times; the median
of each. A script whose plain run fails (it needs data, a checkpoint,
arguments) is listed as not runnable with the last line of its error. The
table (markdown) gives per script both medians and their ratio, and overall
the geometric mean and the maximum of the ratios; beside the wall time, the
CPU time (user + system, with the DataLoader workers), steadier on a shared
machine.

    python bench/run_overhead.py                          # examples/ and fixtures/, 3 repeats
    python bench/run_overhead.py --repeat 5 examples/train.py
    python bench/run_overhead.py --json overhead.json --markdown overhead.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
PLAIN = ROOT / "bench" / "_plain_run.py"


@dataclass
class Timing:
    script: str
    plain_s: List[float]
    run_s: List[float]
    plain_cpu_s: List[float] = field(default_factory=list)
    run_cpu_s: List[float] = field(default_factory=list)
    error: Optional[str] = None  # why it is not runnable (its plain run failed)

    @property
    def plain(self) -> float:
        return statistics.median(self.plain_s)

    @property
    def run(self) -> float:
        return statistics.median(self.run_s)

    @property
    def ratio(self) -> float:
        return self.run / self.plain

    @property
    def cpu_ratio(self) -> float:
        return statistics.median(self.run_cpu_s) / statistics.median(self.plain_cpu_s)


def default_scripts() -> List[Path]:
    examples = sorted((ROOT / "examples").glob("*.py"))
    fixtures = sorted(
        p for d in sorted((ROOT / "fixtures").iterdir()) for p in (d / "bad.py", d / "fixed.py") if p.is_file()
    )
    return examples + fixtures


def environment(threads: int, smoke: bool) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
        PYTHONHASHSEED="0",
        MPLBACKEND="Agg",
        PYTHONDONTWRITEBYTECODE="1",
        # `torchlint run` makes torch.compile return its model unchanged: the plain run compiles nothing either
        TORCHDYNAMO_DISABLE="1",
    )
    env.pop("TORCHLINT_SMOKE", None)
    if smoke:
        env["TORCHLINT_SMOKE"] = "1"
    return env


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(cmd: Sequence[str], env: Dict[str, str], cwd: str, timeout: float) -> tuple:
    """Wall seconds, CPU seconds (the process and the children it waited for), the result."""
    cpu, start = _cpu(), time.perf_counter()
    proc = subprocess.run(list(cmd), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - start, _cpu() - cpu, proc


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


def measure(script: Path, repeat: int, threads: int, timeout: float) -> Timing:
    smoke = script.parent.parent.name == "fixtures"
    env = environment(threads, smoke)
    plain_cmd = [sys.executable, str(PLAIN), str(script)]
    run_cmd = [sys.executable, "-m", "torchlint", "run", "--exit-zero", str(script)]
    name = os.path.relpath(script, ROOT)
    timing = Timing(name, [], [])
    with tempfile.TemporaryDirectory(prefix="torchlint-overhead-") as scratch:
        for _ in range(repeat):
            seconds, cpu, proc = _timed(plain_cmd, env, scratch, timeout)
            if proc.returncode != 0:
                timing.error = _last_line(proc.stderr or proc.stdout)
                return timing
            timing.plain_s.append(seconds)
            timing.plain_cpu_s.append(cpu)
            seconds, cpu, proc = _timed(run_cmd, env, scratch, timeout)
            if proc.returncode != 0:
                timing.error = "under torchlint run: " + _last_line(proc.stderr or proc.stdout)
                return timing
            timing.run_s.append(seconds)
            timing.run_cpu_s.append(cpu)
    return timing


def geometric_mean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown(timings: Sequence[Timing]) -> str:
    ok = [t for t in timings if t.error is None]
    out = [
        "| script | plain (s) | `torchlint run` (s) | ratio | CPU-time ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [f"| `{t.script}` | {t.plain:.2f} | {t.run:.2f} | {t.ratio:.2f} | {t.cpu_ratio:.2f} |" for t in ok]
    if ok:
        ratios = [t.ratio for t in ok]
        worst = max(ok, key=lambda t: t.ratio)
        out.append("")
        out.append(
            f"{len(ok)} scripts; wall-time ratio geometric mean **{geometric_mean(ratios):.2f}**, "
            f"max **{worst.ratio:.2f}** (`{worst.script}`); total {sum(t.plain for t in ok):.1f} s plain, "
            f"{sum(t.run for t in ok):.1f} s under `torchlint run`; CPU-time ratio geometric mean "
            f"{geometric_mean([t.cpu_ratio for t in ok]):.2f}, max {max(t.cpu_ratio for t in ok):.2f}."
        )
    bad = [t for t in timings if t.error is not None]
    if bad:
        out.append("")
        out.append("Not runnable here: " + "; ".join(f"`{t.script}` ({t.error})" for t in bad) + ".")
    return "\n".join(out) + "\n"


def write(timings: Sequence[Timing], table: Optional[Path], data: Optional[Path]) -> None:
    if table:
        table.write_text(markdown(timings), encoding="utf-8")
    if data:
        data.write_text(json.dumps([asdict(t) for t in timings], indent=2) + "\n", encoding="utf-8")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", type=Path, help="scripts (default: examples/ and fixtures/)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, alternately (median)")
    parser.add_argument("--threads", type=int, default=1, help="OMP/MKL threads in both runs")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per process")
    parser.add_argument("--json", type=Path, help="write the timings here")
    parser.add_argument("--markdown", type=Path, help="write the table here")
    args = parser.parse_args(argv)
    scripts = [p.resolve() for p in args.scripts] or default_scripts()
    timings = []
    for script in scripts:
        t = measure(script, args.repeat, args.threads, args.timeout)
        status = t.error or f"plain {t.plain:.2f} s, run {t.run:.2f} s, ratio {t.ratio:.2f} (CPU {t.cpu_ratio:.2f})"
        print(f"{t.script}: {status}", file=sys.stderr, flush=True)
        timings.append(t)
        write(timings, args.markdown, args.json)  # after each script: an interrupted run keeps what it measured
    print(markdown(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
