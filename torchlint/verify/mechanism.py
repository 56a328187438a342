"""`torchlint verify --mechanism`: every fixture pair run under `torchlint
run` on the simulated GPU, without a GPU. A rule's mechanism is *observed*
when its bad script shows the rule's code and its fixed script does not.

Each script is a fresh ``python -m torchlint.verify.mechanism_run`` process
(smoke sizes, the harness instrumenting nothing) that writes what the run saw
as JSON; this module judges the pair (no torch here):

| verdict | when |
|---|---|
| observed | bad.py shows the code at least once (per step, for a rule reported only per step) and fixed.py never does |
| not-observed | bad.py ran and does not show it |
| fixed-still-observed | bad.py shows it and so does fixed.py |
| error | a script did not run to its end (it raised, exited non-zero, timed out, or left no report) |
| not-observable | a rule a run cannot observe (TL000, TL001, TL105, TL402): not run |

"Shows" means a finding `torchlint run` reports: an observation the run keeps
but does not report (a host read once after training) is in the record, not a
finding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from torchlint.runtime.compare import UNOBSERVABLE
from torchlint.verify.fixture_meta import SCRIPTS, Fixture
from torchlint.verify.harness import MECHANISM_ENV
from torchlint.verify.rule_results import fixture_header
from torchlint.verify.script_runs import child_env

OBSERVED = "observed"
NOT_OBSERVED = "not-observed"
FIXED_STILL_OBSERVED = "fixed-still-observed"
ERROR = "error"
NOT_OBSERVABLE = "not-observable"
VERDICTS = (OBSERVED, NOT_OBSERVED, FIXED_STILL_OBSERVED, ERROR, NOT_OBSERVABLE)
ENDED_WELL = ("ok", "stopped")  # RunReport statuses of a script that ran to its end (or to --steps)
DEVICE = "simulated GPU (torchlint run)"
DEFAULT_TIMEOUT = 300.0


@dataclass
class ScriptRun:
    """One script's run under `torchlint run`: the child's exit code and what the run saw."""

    rule: str
    script: str  # "bad" | "fixed"
    rc: int = 0
    report: Optional[Dict[str, Any]] = None  # mechanism_run's JSON
    error: str = ""  # the child's own failure (timed out, no report)
    seconds: float = 0.0


def observable(rule: str) -> bool:
    return rule not in UNOBSERVABLE


def findings(run: ScriptRun, code: str) -> List[Dict[str, Any]]:
    """The reported observations of `code` in the run."""
    return [o for o in (run.report or {}).get("observations", ()) if o["code"] == code and o["reported"]]


def shows(run: ScriptRun, code: str) -> bool:
    """The run reports `code`, per step where the code is reported only per step."""
    per_step_codes = set((run.report or {}).get("per_step_codes", ()))
    return any(o["per_step"] or code not in per_step_codes or o["crash"] for o in findings(run, code))


def run_error(run: ScriptRun) -> str:
    """Why the run did not end well, or "" when it did."""
    if run.error:
        return run.error
    if run.report is None:
        return f"exit {run.rc}: no report"
    status = run.report.get("status")
    if status not in ENDED_WELL:
        err = run.report.get("error") or {}
        what = f"{err.get('type')}: {err.get('message')}" if err else f"exit code {run.report.get('exit_code')}"
        return f"{status}: {what}"
    return ""


def judge(rule: str, bad: ScriptRun, fixed: ScriptRun) -> Tuple[str, str]:
    """The verdict for a pair, and its reason."""
    errors = [f"{r.script}.py {e}" for r in (bad, fixed) for e in [run_error(r)] if e]
    if errors:
        return ERROR, "; ".join(errors)
    if not shows(bad, rule):
        others = sorted({o["code"] for o in (bad.report or {}).get("observations", ()) if o["reported"]})
        seen = f" (it reports {', '.join(others)})" if others else " (it reports nothing)"
        unreported = [o for o in (bad.report or {}).get("observations", ()) if o["code"] == rule]
        if unreported:
            seen = f" ({rule} seen {describe(unreported[0])}, not reported)"
        return NOT_OBSERVED, f"bad.py does not show {rule}{seen}"
    if shows(fixed, rule):
        return FIXED_STILL_OBSERVED, f"fixed.py still shows {rule}: {describe(findings(fixed, rule)[0])}"
    return OBSERVED, f"bad.py shows {rule} {describe(findings(bad, rule)[0])}; fixed.py does not"


def describe(o: Dict[str, Any]) -> str:
    """ "at bad.py:37, 6 times in 6 of 6 optimizer steps"."""
    times = "once" if o["count"] == 1 else f"{o['count']} times"
    return f"at {o['where']}, {times} in {o['steps_seen']} of {o['steps']} {o['clock']}"


def script_record(run: ScriptRun, rule: str) -> Dict[str, Any]:
    """A script's part of the rule's record."""
    report = run.report or {}
    return {
        "script": run.script,
        "rc": run.rc,
        "seconds": round(run.seconds, 3),
        "error": run_error(run),
        "status": report.get("status"),
        "steps": report.get("steps"),
        "clock": report.get("clock"),
        "shows": shows(run, rule) if run.report is not None else None,
        "findings": [_brief(o) for o in report.get("observations", ()) if o["reported"]],
        "unreported": [_brief(o) for o in report.get("observations", ()) if not o["reported"]],
    }


def _brief(o: Dict[str, Any]) -> Dict[str, Any]:
    keys = ("code", "where", "count", "steps_seen", "steps", "clock", "per_step", "crash")
    return {k: o.get(k) for k in keys}


def rule_result(fx: Fixture, bad: ScriptRun, fixed: ScriptRun, root: Optional[Path] = None) -> Dict[str, Any]:
    verdict, reason = judge(fx.rule, bad, fixed)
    result = fixture_header(fx, root)
    result.update(verdict=verdict, reason=reason, bad=script_record(bad, fx.rule), fixed=script_record(fixed, fx.rule))
    return result


def not_observable_result(fx: Fixture, root: Optional[Path] = None) -> Dict[str, Any]:
    result = fixture_header(fx, root)
    result.update(
        verdict=NOT_OBSERVABLE,
        reason=f"a run does not observe {fx.rule} (docs/run.md, '--compare': not checked); its scripts are not run",
        bad=None,
        fixed=None,
    )
    return result


def passed(results: Sequence[Dict[str, Any]]) -> bool:
    """Every observable rule observed."""
    return all(r["verdict"] in (OBSERVED, NOT_OBSERVABLE) for r in results)


# ---------------------------------------------------------------------------
# Running the scripts


def run_script(fx: Fixture, which: str, timeout: float = DEFAULT_TIMEOUT) -> ScriptRun:
    """`which` (bad/fixed) of `fx` under `torchlint run`, in a fresh process."""
    run = ScriptRun(fx.rule, which)
    fd, out = tempfile.mkstemp(prefix=f"torchlint-mechanism-{fx.rule}-{which}-", suffix=".json")
    os.close(fd)
    os.unlink(out)
    env = child_env(("timing",), True, {MECHANISM_ENV: "1"})
    cmd = [sys.executable, "-m", "torchlint.verify.mechanism_run", str(fx.script(which)), out]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=str(fx.path), env=env, capture_output=True, text=True, timeout=timeout)
        run.rc = proc.returncode
        if os.path.exists(out):
            with open(out, encoding="utf-8") as fh:
                run.report = json.load(fh)
        else:
            tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
            run.error = f"exit {proc.returncode}: no report ({tail})"
    except subprocess.TimeoutExpired:
        run.rc, run.error = -1, f"timed out after {timeout:g} s"
    except (OSError, ValueError) as exc:
        run.rc, run.error = -1, f"no readable report: {exc}"
    finally:
        run.seconds = time.perf_counter() - start
        if os.path.exists(out):
            os.unlink(out)
    return run


def check(
    fixtures: Sequence[Fixture],
    jobs: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    progress: Optional[Callable[[ScriptRun], None]] = None,
    root: Optional[Path] = None,
    runner: Optional[Callable[[Fixture, str, float], ScriptRun]] = None,
) -> List[Dict[str, Any]]:
    """Every observable fixture's pair, in `jobs` parallel processes (`runner`, default
    `run_script`, runs one script); one result per fixture, in order."""
    jobs = jobs or max(1, min(4, os.cpu_count() or 1))
    runner = runner or run_script
    tasks = [(fx, which) for fx in fixtures if observable(fx.rule) for which in SCRIPTS]
    runs: Dict[Tuple[str, str], ScriptRun] = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(runner, fx, which, timeout): (fx, which) for fx, which in tasks}
        for fut in as_completed(futures):
            fx, which = futures[fut]
            runs[(str(fx.path), which)] = fut.result()
            if progress:
                progress(runs[(str(fx.path), which)])
    out = []
    for fx in fixtures:
        if not observable(fx.rule):
            out.append(not_observable_result(fx, root))
        else:
            out.append(rule_result(fx, runs[(str(fx.path), "bad")], runs[(str(fx.path), "fixed")], root))
    return out


def planned_runs(fixtures: Sequence[Fixture]) -> int:
    return sum(len(SCRIPTS) for fx in fixtures if observable(fx.rule))
