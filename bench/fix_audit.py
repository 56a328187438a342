"""Fix audit: does `torchlint --fix --unsafe-fixes` leave real code intact,
and are its edits worth making?

Copies a corpus of restored third-party repositories (default `../corpus`,
see `../shared/corpus/README.md`; `--corpus ../pool --repos a__b,c__d` for
pool repositories) to a temporary folder and runs the CLI over the copy, as a
user would:

    torchlint check --no-cache --exit-zero --output-format json   (findings before)
    torchlint check --no-cache --exit-zero --fix --unsafe-fixes   (the fix)
    torchlint check --no-cache --exit-zero --output-format json   (findings after)
    torchlint check --no-cache --exit-zero --fix --unsafe-fixes   (again: must change nothing)

and checks that

- every changed file still parses (compiles, for .py; for notebooks: valid
  JSON, the same cells with the same types, outputs and metadata, code that
  compiles);
- the second fix run changes nothing (idempotent);
- the findings a fix targeted are gone and no new finding appears. Findings
  are compared per file by (rule, message) counts, which line shifts do not
  change: after the fix a key may keep at most max(0, before - fixes applied)
  findings, and never more than it had before.

To know which fix did what, every file with a fixable finding is also fixed
in this process through `torchlint.api.process_bytes`, with the fix loop
instrumented: each applied fix is recorded with the rule, the finding and the
text it was applied to (also fixes applied in later passes), and whether the
code it fixed runs once or per step (torchlint's cost fact). That run must
produce the same bytes as the CLI; a difference is reported.

**Runs** (`--run`): every changed script and notebook is run, as it was and
as fixed, with bench/sim_accel.py (no network, seeded, one thread; notebooks
cell by cell through IPython, their displayed values compared; torchvision's
downloadable image sets are small synthetic ones unless `--no-fake-data`), on
the CPU and on the simulated accelerator (`torch.cuda.is_available()` True,
"cuda" tensors on PyTorch's meta device: device mismatches raise). A file
that fails the same way before and after cannot run here (missing data,
modules or arguments) and says nothing. A wrong edit is a run that changed: a
new crash, a failure at an earlier cell or line, other printed or displayed
output on the CPU (confirmed by a second run of the original, else
"nondeterministic"), a new timeout; it is blamed on the rules whose fixes
alone reproduce it. Both failing at the same place, differently, is listed
for review (a fix that mends one of two mistakes of a script that crashes on
a GPU anyway looks like that). Install what the code imports (torchvision
matching torch, pandas, ...) in the environment that runs the audit: a file
whose import fails says nothing. The report lists wrong edits by
rule, and per rule the fixes whose benefit is per run (TL104, TL201, TL401...)
made at code that runs once: the candidates for "no benefit".

**Judging sheet** (`--groups N --sheet FOLDER`): a seeded, uniform sample of
N edit groups (one fix: the edits one finding's fix made together; the same
fix in an identical file counted once), written outside the repository as
`sheet.md` (each group's diff, per cell for notebooks, its context and the
file's runs), `groups.jsonl` and an empty `verdicts.jsonl` for the judges
(correct / no-benefit / wrong). `--tally FOLDER` prints the verdicts by rule
and whether the bar is met (0 wrong, at most 10% no-benefit).

    python bench/fix_audit.py --corpus ../corpus --run --json ../accuracy-work/fix-audit.json
    python bench/fix_audit.py --corpus ../pool --repos-file ../accuracy-work/fresh-repos.txt \\
        --run --groups 64 --seed 26 --sheet ../accuracy-work/fix-sheet
    python bench/fix_audit.py --tally ../accuracy-work/fix-sheet

(`--per-rule`/`--sample-out` draw the older per-rule JSONL sample.)

Exit status: 0 when every check passes (and no run changed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import difflib
import hashlib
import json
import multiprocessing
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

try:
    from bench.sim_accel import normalize
except ImportError:  # run as a script: bench/ is on sys.path
    from sim_accel import normalize  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
DEFAULT_CORPUS = PROJECT.parent / "corpus"
SUFFIXES = (".py", ".ipynb")


# -- the CLI -------------------------------------------------------------------------------


def run_cli(cmd: str, args: List[str], preview: bool = True) -> subprocess.CompletedProcess:
    """`cmd check --no-cache --exit-zero ARGS`, with every rule (preview ones
    included, as in judging rounds) unless `preview` is False."""
    argv = shlex.split(cmd) + ["check", "--no-cache", "--exit-zero", "--preview" if preview else "--no-preview", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=PROJECT)


def lint(cmd: str, root: Path, preview: bool = True) -> List[dict]:
    proc = run_cli(cmd, ["--output-format", "json", str(root)], preview)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"torchlint printed no JSON (exit {proc.returncode})") from None


def fix(cmd: str, root: Path, preview: bool = True) -> subprocess.CompletedProcess:
    proc = run_cli(cmd, ["--fix", "--unsafe-fixes", "--quiet", "--output-format", "concise", str(root)], preview)
    if proc.returncode not in (0, 1, 2):
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"torchlint --fix failed (exit {proc.returncode})")
    return proc


def snapshot(root: Path) -> Dict[str, bytes]:
    """Every .py/.ipynb file under `root`: relative path -> contents."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in SUFFIXES and path.is_file() and not path.is_symlink():
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


def rel_of(root: Path, filename: str) -> str:
    return Path(filename).resolve().relative_to(root.resolve()).as_posix()


# -- the instrumented fix: which rule's fix changed what -----------------------------------

_STATE: Dict[str, Any] = {}


def _install_recorder() -> None:
    """Wrap the fix loop so each applied fix is recorded with its finding and
    the document it was applied to. Behaviour is unchanged: the wrappers call
    the originals and only look."""
    from torchlint.engine import fix_loop
    from torchlint.source import notebook

    if getattr(fix_loop, "_audit_installed", False):
        return
    original_applicable = fix_loop._applicable

    def applicable(document, findings, allowed, refused):
        out = original_applicable(document, findings, allowed, refused)
        for f in findings:
            if f.fix is not None and f.fix.applicability in allowed:
                edits = document.edits_of(f)
                if edits is not None:
                    _STATE["offered"].setdefault(edits, f)
        return out

    fix_loop._applicable = applicable

    for cls in (fix_loop.TextDocument, notebook.Cells):
        original_apply = cls.apply

        def apply(self, fixes, _orig=original_apply):
            new, n = _orig(self, fixes)
            applied, before = [], 0
            for k in range(len(fixes)):  # which groups the greedy choice took: prefixes count them
                _, count = _orig(self, fixes[: k + 1])
                if count > before:
                    applied.append(fixes[k])
                before = count
            _STATE["lineage"][new.source] = (self, [(e, _STATE["offered"].get(e)) for e in applied])
            return new, n

        cls.apply = apply
    fix_loop._audit_installed = True


def _final_source(data: bytes, is_nb: bool) -> Optional[str]:
    from torchlint.source import notebook
    from torchlint.source.decode import decode_source

    if is_nb:
        cells = notebook.read(data)
        return cells.source if cells is not None else None
    text = decode_source(data).text
    return text[1:] if text.startswith("\ufeff") else text


def instrumented_fix(item: Tuple[str, str, bytes, bool]) -> dict:
    """Fix one file's contents through the API (with the preview rules when
    the item says so), recording every applied fix."""
    from torchlint import api
    from torchlint.config import Settings
    from torchlint.source import notebook
    from torchlint.source.edits import apply_fix_groups

    _install_recorder()
    rel, path, data, preview = item
    is_nb = rel.endswith(".ipynb")
    _STATE["offered"] = {}
    _STATE["lineage"] = {}
    outcome = api.process_bytes(data, path, Settings(preview=preview), mode="fix", unsafe=True)
    new = outcome.new_data
    result: Dict[str, Any] = {
        "rel": rel,
        "new_sha": hashlib.sha1(new).hexdigest() if new is not None else None,
        "problems": [str(p) for p in outcome.problems],
        "fixes": [],
        "lineage_ok": True,
    }
    if new is None:
        return result
    # Walk back from the final text to the original, pass by pass.
    steps = []
    src = _final_source(new, is_nb)
    original = _final_source(data, is_nb)
    seen = set()
    while src != original and src in _STATE["lineage"] and src not in seen:
        seen.add(src)
        parent, applied = _STATE["lineage"][src]
        steps.append((parent, applied))
        src = parent.source
    result["lineage_ok"] = src == original
    steps.reverse()
    _cost_cache: Dict[str, Any] = {}
    for number, (parent, applied) in enumerate(steps, 1):
        for edits, finding in applied:
            text = parent.source
            fixed, _ = apply_fix_groups(text, [edits])
            row = finding.row if finding is not None else edits[0].row
            cell, cell_row, cell_span = None, row, None
            if isinstance(parent, notebook.Cells):
                i, cell_row = parent.locate(row)
                cell = parent.cells[i].number
                cell_span = [parent.starts[i], parent.lengths[i]]  # module row of its first line, lines
            result["fixes"].append(
                {
                    "rule": finding.code if finding is not None else "?",
                    "message": finding.message if finding is not None else "",
                    "applicability": str(finding.fix.applicability) if finding is not None and finding.fix else "?",
                    "row": row,
                    "line": cell_row,
                    "cell": cell,
                    "cell_span": cell_span,
                    "runs": _runs_per_step(text, row, _cost_cache),
                    "pass": number,
                    "edits": [[e.row, e.column, e.end_row, e.end_column, e.content] for e in edits],
                    "before": text,
                    "after": fixed,
                }
            )
    return result


def _runs_per_step(text: str, row: int, cache: Dict[str, Any]) -> Optional[str]:
    """How often the code a fix was made for runs ("per step" or "once", as
    torchlint's cost fact says: torchlint/analysis/cost.py), for the judges'
    sheet: a fix whose benefit is per execution (an allocation, a graph, a
    sync) at code that runs once is a candidate for "no benefit". None when
    no call starts on that row."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchlint.analysis import Analysis

    found = cache.get(text)
    if found is None:
        try:
            module = cst.parse_module(text)
            wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
            positions = wrapper.resolve(PositionProvider)
            found = cache[text] = (Analysis(module, "audit.py", text), positions)
        except Exception:  # a text that does not parse: no hint
            found = cache[text] = (None, None)
    analysis, positions = found
    if analysis is None:
        return None
    for call in analysis.facts.calls:
        pos = positions.get(call.node)
        if pos is not None and pos.start.line == row:
            return "per step" if analysis.cost.per_step(call.site) else "once"
    return None


# -- checks ----------------------------------------------------------------------------------


def compiles(data: bytes, rel: str) -> Tuple[bool, str]:
    """Whether the file's Python compiles (a notebook: its code cells, IPython blanked)."""
    from torchlint.source import notebook
    from torchlint.source.decode import decode_source

    try:
        if rel.endswith(".ipynb"):
            cells = notebook.read(data)
            text = cells.source if cells is not None else ""
        else:
            text = decode_source(data).text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # SyntaxWarnings of the corpus's own code
            compile(text, rel, "exec", dont_inherit=True)
        return True, ""
    except (SyntaxError, ValueError, notebook.NotebookError) as exc:
        return False, f"{type(exc).__name__}: {exc}"
    except Exception as exc:  # decode errors and the like
        return False, f"{type(exc).__name__}: {exc}"


def notebook_shape_problem(old: bytes, new: bytes) -> Optional[str]:
    """A changed notebook keeps its cells, their types, outputs and metadata."""
    try:
        a = json.loads(old.decode("utf-8-sig"))
        b = json.loads(new.decode("utf-8-sig"))
    except ValueError as exc:
        return f"invalid JSON after the fix: {exc}"
    if len(a.get("cells", [])) != len(b.get("cells", [])):
        return f"cell count changed: {len(a['cells'])} -> {len(b['cells'])}"
    for k, (x, y) in enumerate(zip(a["cells"], b["cells"]), 1):
        if x.get("cell_type") != y.get("cell_type"):
            return f"cell {k} type changed: {x.get('cell_type')} -> {y.get('cell_type')}"
        if {kk: v for kk, v in x.items() if kk != "source"} != {kk: v for kk, v in y.items() if kk != "source"}:
            return f"cell {k}: something other than its source changed"
        if x.get("cell_type") != "code" and x.get("source") != y.get("source"):
            return f"cell {k}: a non-code cell's source changed"
    if {k: v for k, v in a.items() if k != "cells"} != {k: v for k, v in b.items() if k != "cells"}:
        return "notebook metadata changed"
    return None


def finding_keys(findings: List[dict], root: Path) -> collections.Counter:
    return collections.Counter((rel_of(root, f["filename"]), f["code"], f["message"]) for f in findings)


# -- sample ----------------------------------------------------------------------------------


def _changed_rows(before: str, after: str) -> Tuple[List[str], int, int]:
    """The -/+ lines of the change and the (1-based) row span it touches in `before`."""
    a, b = before.splitlines(), after.splitlines()
    lines, lo, hi = [], None, None
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        lines += [f"-{x}" for x in a[i1:i2]] + [f"+{x}" for x in b[j1:j2]]
        lo = i1 + 1 if lo is None else min(lo, i1 + 1)
        hi = max(hi or 0, max(i2, i1 + 1))
    return lines, lo or 1, hi or 1


def sample_row(fx: dict, path: str, radius: int = 25) -> dict:
    before, after = fx["before"], fx["after"]
    edit, lo, hi = _changed_rows(before, after)
    hunk = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True), fromfile=path, tofile=path, n=3
        )
    )
    lines = before.splitlines()
    a, b = max(1, lo - radius), min(len(lines), hi + radius)
    context = "\n".join(f"{'>' if lo <= i <= hi else ' '}{i:5} {lines[i - 1]}" for i in range(a, b + 1))
    return {
        "rule": fx["rule"],
        "path": path,
        "line": fx["line"],
        "cell": fx["cell"],
        "applicability": fx["applicability"],
        "pass": fx["pass"],
        "message": fx["message"],
        "edit": "\n".join(edit),
        "diff": hunk,
        "context": context,
        "context_note": "rows of the notebook's code cells joined in order" if fx["cell"] is not None else "",
    }


# -- running the changed files, before and after ------------------------------------------------

SIM = HERE / "sim_accel.py"
# What a run may not reach: no GPU, no hub, no tracking service (sockets are refused too).
RUN_ENV = {
    "CUDA_VISIBLE_DEVICES": "",
    "PYTHONHASHSEED": "0",
    "MPLBACKEND": "Agg",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "WANDB_MODE": "disabled",
    "TQDM_DISABLE": "1",
}
MODES = (("cpu", False), ("accelerator", True))
# Verdicts of a (before, after) pair of runs that point at a wrong edit...
WRONG = ("new crash", "fails earlier", "output changed", "new timeout")
# ...and one a person must look at: both fail at the same place, differently (a fix that mends
# one of two unmoved tensors of a script that crashes on a GPU anyway, or one that breaks it).
REVIEW = ("failure changed",)


def run_file(item: Tuple[str, str, bool, int, int, bool]) -> dict:
    """Run one file (bench/sim_accel.py) in its folder: its result, with the
    printed output (normalized) and "timeout" when it ran past the limit."""
    tree, rel, accel, timeout, memory_gb, fake_data = item
    path = Path(tree) / rel
    out = Path(tempfile.mkstemp(prefix="torchlint-run-", suffix=".json")[1])
    flags = (["--accel"] if accel else []) + (["--fake-data"] if fake_data else [])
    argv = [sys.executable, str(SIM), *flags, "--out", str(out), str(path)]
    env = dict(os.environ, **RUN_ENV)

    def limits() -> None:
        os.setsid()
        if memory_gb:
            import resource

            size = memory_gb << 30
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    try:
        proc = subprocess.Popen(
            argv,
            cwd=path.parent,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            preexec_fn=limits,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return {"status": "timeout", "error": None, "stdout": "", "kind": _kind(rel)}
        try:
            result = json.loads(out.read_text() or "null")
        except (OSError, ValueError):
            result = None
        if not isinstance(result, dict):
            tail = (stderr or "")[-500:]
            return {"status": "error", "error": {"type": "Died", "message": tail, "cell": None}, "stdout": ""}
        if result["kind"] == "script":
            result["stdout"] = normalize(stdout[-20000:], str(path.parent))
        return result
    finally:
        with contextlib.suppress(OSError):
            out.unlink()


def _kind(rel: str) -> str:
    return "notebook" if rel.endswith(".ipynb") else "script"


def _error_key(result: dict) -> Tuple:
    err = result.get("error") or {}
    return (err.get("type"), normalize(err.get("message") or "")[:300], err.get("cell"))


def _outputs(result: dict) -> List:
    """What a run showed: a script's printed output; a notebook's cells' displayed
    values and printed output (normalized)."""
    if result.get("kind") == "notebook":
        return [
            (c["number"], c["status"], normalize(c["display"] or ""), normalize(c["stdout"])) for c in result["cells"]
        ]
    return [result.get("stdout", "")]


def _first_difference(a: dict, b: dict) -> Optional[int]:
    """The first notebook cell whose output differs between two runs."""
    for x, y in zip(_outputs(a), _outputs(b)):
        if x != y:
            return x[0] if isinstance(x, tuple) else None
    return None


def compare(
    before: dict, after: dict, compare_output: bool, line_map: Optional[Callable[[int], int]] = None
) -> Tuple[str, str, Optional[int]]:
    """(verdict, detail, cell) for a run of the original and of the fixed file.

    Verdicts: "same"; "not runnable" (the original fails here the same way,
    or runs past the time limit: missing data, arguments, network; or the
    fixed file gets further before failing); "fixed a failure"; the
    wrong-edit verdicts: "new crash", "fails earlier" (both fail, the fixed
    file at an earlier cell or script line), "output changed" (CPU runs only:
    a printed or displayed value differs), "new timeout"; and "failure
    changed" (both fail at the same place, differently: for a person to
    read). `line_map` maps a line of the original script to the fixed one."""
    if before["status"] == "timeout":
        return "not runnable", "the original ran past the time limit", None
    if before["status"] == "error":
        b, a = _error_key(before), _error_key(after)
        if after["status"] == "ok":
            return "fixed a failure", f"{b[0]}: {b[1][:200]}", None
        if after["status"] == "timeout":
            return "new timeout", "the original failed quickly; the fixed ran past the time limit", None
        if b == a:
            return "not runnable", f"{b[0]}: {b[1][:200]}", b[2]
        detail = f"{b[0]}: {b[1][:150]} -> {a[0]}: {a[1][:150]}"
        order = _progress(before, after, line_map)
        if order > 0:
            return "not runnable", "the fixed file gets further before failing: " + detail, b[2]
        if order < 0:
            return "fails earlier", detail, a[2]
        return "failure changed", detail, a[2]
    if after["status"] == "timeout":
        return "new timeout", "the fixed file ran past the time limit", None
    if after["status"] == "error":
        a = _error_key(after)
        return "new crash", f"{a[0]}: {a[1][:300]}", a[2]
    if compare_output and _outputs(before) != _outputs(after):
        return "output changed", "printed or displayed output differs", _first_difference(before, after)
    return "same", "", None


def _progress(before: dict, after: dict, line_map: Optional[Callable[[int], int]]) -> int:
    """Where the fixed file failed compared with the original: 1 further, -1
    earlier, 0 at the same place (or unknown)."""
    b, a = before.get("error") or {}, after.get("error") or {}
    if b.get("cell") is not None and a.get("cell") is not None:
        return (a["cell"] > b["cell"]) - (a["cell"] < b["cell"])
    if b.get("line") is not None and a.get("line") is not None and line_map is not None:
        mapped = line_map(b["line"])
        return (a["line"] > mapped) - (a["line"] < mapped)
    return 0


def _rule_lines(data: bytes, new: bytes, lines):
    if lines is None:
        return None
    return line_map(data.decode("utf-8", "replace"), new.decode("utf-8", "replace"))


def line_map(old: str, new: str) -> Callable[[int], int]:
    """Line numbers of `old` to those of `new` (a changed line to where its block starts)."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    blocks = matcher.get_opcodes()

    def where(line: int) -> int:
        i = line - 1
        for tag, i1, i2, j1, _j2 in blocks:
            if i1 <= i < i2:
                return (j1 + (i - i1) if tag == "equal" else j1) + 1
        return line

    return where


def run_changed(
    before_root: Path,
    after_root: Path,
    changed: List[str],
    recorded: Dict[str, dict],
    original: Dict[str, bytes],
    opts: "Options",
) -> dict:
    """Run every changed file before and after its fixes, on the CPU and the
    simulated accelerator; a wrong-edit verdict on the CPU is confirmed by a
    second run of the original (a program whose output varies between runs
    is "nondeterministic", not wrong), then blamed on the rules whose fixes
    alone reproduce it."""
    items: List[Tuple[str, str, bool, int, int, bool]] = []
    for rel in changed:
        for _, accel in MODES:
            for tree in (before_root, after_root):
                items.append((str(tree), rel, accel, opts.run_timeout, opts.run_memory_gb, opts.fake_data))
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
    with ctx.Pool(opts.run_jobs or 1) as pool:
        results = pool.map(run_file, items, chunksize=1)
    got = {(tree, rel, accel): r for (tree, rel, accel, *_), r in zip(items, results)}
    verdicts: Dict[str, collections.Counter] = {name: collections.Counter() for name, _ in MODES}
    wrong: List[dict] = []
    review: List[dict] = []
    files: List[dict] = []
    for rel in changed:
        entry: Dict[str, Any] = {"path": rel}
        lines = None
        if not rel.endswith(".ipynb"):
            fixed_text = (after_root / rel).read_bytes().decode("utf-8", "replace")
            lines = line_map(original[rel].decode("utf-8", "replace"), fixed_text)
        for name, accel in MODES:
            b, a = got[(str(before_root), rel, accel)], got[(str(after_root), rel, accel)]
            verdict, detail, cell = compare(b, a, not accel, lines)
            if verdict == "output changed":
                again = run_file((str(before_root), rel, accel, opts.run_timeout, opts.run_memory_gb, opts.fake_data))
                if _outputs(again) != _outputs(b):
                    verdict, detail = "nondeterministic", "the original's output differs between two runs"
            verdicts[name][verdict] += 1
            entry[name] = {"verdict": verdict, "detail": detail, "cell": cell}
            if verdict in REVIEW:
                rules = sorted({fx["rule"] for fx in recorded.get(rel, {}).get("fixes", [])})
                review.append(
                    {"path": rel, "mode": name, "verdict": verdict, "detail": detail, "cell": cell, "rules": rules}
                )
            if verdict in WRONG:
                rules = sorted({fx["rule"] for fx in recorded.get(rel, {}).get("fixes", [])})
                blamed = blame(before_root, rel, original[rel], accel, verdict, b, rules, opts, lines)
                wrong.append(
                    {
                        "path": rel,
                        "mode": name,
                        "verdict": verdict,
                        "detail": detail,
                        "cell": cell,
                        "rules": rules,
                        "blamed": blamed,
                    }
                )
        files.append(entry)
    by_rule: collections.Counter = collections.Counter()
    for w in wrong:
        for rule in w["blamed"] or w["rules"]:
            by_rule[rule] += 1
    return {
        "files": len(changed),
        "timeout_s": opts.run_timeout,
        "cpu": dict(sorted(verdicts["cpu"].items())),
        "accelerator": dict(sorted(verdicts["accelerator"].items())),
        "accelerator_new_crashes": sum(1 for w in wrong if w["mode"] == "accelerator" and w["verdict"] == "new crash"),
        "wrong": wrong,
        "wrong_by_rule": dict(sorted(by_rule.items())),
        "review": review,
        "per_file": files,
    }


def blame(
    before_root: Path, rel: str, data: bytes, accel: bool, verdict: str, original_run: dict, rules, opts, lines=None
) -> List[str]:
    """The rules whose fixes alone (the file fixed with only that rule enabled)
    reproduce `verdict`; empty when none does alone (the fixes interact)."""
    from torchlint.engine import pipeline

    path = before_root / rel
    blamed = []
    try:
        for rule in rules:
            outcome = pipeline.process_bytes(data, str(path), frozenset({rule}), mode="fix", unsafe=True)
            if outcome.new_data is None:
                continue
            path.write_bytes(outcome.new_data)
            result = run_file((str(before_root), rel, accel, opts.run_timeout, opts.run_memory_gb, opts.fake_data))
            if compare(original_run, result, not accel, _rule_lines(data, outcome.new_data, lines))[0] == verdict:
                blamed.append(rule)
    finally:
        path.write_bytes(data)
    return blamed


# -- main ------------------------------------------------------------------------------------


@dataclass
class Options:
    """How to audit: which repositories, what to run, what to sample."""

    seed: int = 7
    preview: bool = True  # every rule, as judging rounds run them
    per_rule: int = 10
    sample_out: Optional[Path] = None
    jobs: int = 0
    keep: bool = False
    fixes_out: Optional[Path] = None
    repos: Optional[List[str]] = None  # subfolders of the corpus (None: every one)
    run: bool = False  # run the changed files before and after
    run_timeout: int = 120
    run_jobs: int = 2
    run_memory_gb: int = 6
    fake_data: bool = True  # torchvision's downloadable image sets are synthetic in the runs
    groups: int = 0  # a seeded sample of this many edit groups...
    sheet: Optional[Path] = None  # ...written as a judging sheet in this folder


def copy_corpus(corpus: Path, dest: Path, repos: Optional[List[str]]) -> None:
    """The corpus (or only the named repositories of it) copied to `dest`."""
    if repos is None:
        shutil.copytree(corpus, dest, symlinks=True)
        return
    dest.mkdir(parents=True)
    for name in repos:
        if not (corpus / name).is_dir():
            raise SystemExit(f"no repository {name!r} under {corpus}")
        shutil.copytree(corpus / name, dest / name, symlinks=True)


def audit(corpus: Path, cmd: str, opts: Options) -> dict:
    corpus = corpus.resolve()
    work = Path(tempfile.mkdtemp(prefix="torchlint-fix-audit-"))
    root = work / "corpus"
    try:
        copy_corpus(corpus, root, opts.repos)
        if opts.run:
            copy_corpus(corpus, work / "before", opts.repos)  # the originals, to run
        original = snapshot(root)
        before = lint(cmd, root, opts.preview)
        fixable = sorted({rel_of(root, f["filename"]) for f in before if f.get("fix")})
        items = [(rel, str(root / rel), original[rel], opts.preview) for rel in fixable if rel in original]
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
        with ctx.Pool(opts.jobs or os.cpu_count() or 1) as pool:
            recorded = {r["rel"]: r for r in pool.map(instrumented_fix, items, chunksize=1)}
        fix_proc = fix(cmd, root, opts.preview)
        fixed = snapshot(root)
        after = lint(cmd, root, opts.preview)
        again_proc = fix(cmd, root, opts.preview)
        again = snapshot(root)
        report = check(root, original, fixed, again, before, after, recorded, fix_proc, again_proc)
        flag = "--preview" if opts.preview else "--no-preview"
        report["command"] = {
            "lint": f"{cmd} check --no-cache --exit-zero {flag} --output-format json CORPUS_COPY",
            "fix": f"{cmd} check --no-cache --exit-zero {flag} --fix --unsafe-fixes --quiet CORPUS_COPY",
        }
        report["repos"] = sorted(p.name for p in root.iterdir() if p.is_dir())
        report["no_benefit_candidates"] = no_benefit_candidates(recorded, original)
        runs = None
        if opts.run:
            changed = sorted(rel for rel in fixed if fixed[rel] != original.get(rel))
            runs = report["runs"] = run_changed(work / "before", root, changed, recorded, original, opts)
        if opts.sample_out is not None:
            report["sample"] = write_sample(recorded, original, opts.seed, opts.per_rule, opts.sample_out)
        if opts.fixes_out is not None:
            with opts.fixes_out.open("w", encoding="utf-8") as fh:
                for _rule, pool in sorted(unique_fixes(recorded, original).items()):
                    for rel, fx in pool:
                        fh.write(json.dumps(sample_row(fx, rel)) + "\n")
        if opts.groups and opts.sheet is not None:
            report["sheet"] = write_sheet(recorded, original, opts, runs, report["command"])
        return report
    finally:
        if opts.keep:
            print(f"kept the fixed copy in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


# Rules whose fix saves work each time the fixed code runs (an allocation, a graph, a sync):
# at code that runs once, such an edit is a candidate for "no benefit".
PER_RUN_BENEFIT = frozenset({"TL104", "TL106", "TL201", "TL202", "TL401", "TL402", "TL403"})


def no_benefit_candidates(recorded: Dict[str, dict], original: Dict[str, bytes]) -> dict:
    """Per rule, the unique applied fixes whose benefit is per run of the code
    they change, made at code that runs once (torchlint's own cost fact): what
    the judges should look at first for "no benefit"."""
    out: Dict[str, dict] = {}
    for rule, pool in sorted(unique_fixes(recorded, original).items()):
        if rule not in PER_RUN_BENEFIT:
            continue
        once = [
            f"{rel}:{fx['line']}" + (f" (cell {fx['cell']})" if fx["cell"] else "")
            for rel, fx in pool
            if fx.get("runs") == "once"
        ]
        out[rule] = {"unique_fixes": len(pool), "at_code_that_runs_once": len(once), "where": once[:20]}
    return out


def check(root, original, fixed, again, before, after, recorded, fix_proc, again_proc) -> dict:
    changed = sorted(rel for rel in fixed if fixed[rel] != original.get(rel))
    unique = {hashlib.sha1(original[rel]).hexdigest() for rel in changed}
    unparsable, shape = [], []
    for rel in changed:
        ok_before, _ = compiles(original[rel], rel)
        ok_after, why = compiles(fixed[rel], rel)
        if ok_before and not ok_after:
            unparsable.append({"path": rel, "error": why})
        if rel.endswith(".ipynb"):
            problem = notebook_shape_problem(original[rel], fixed[rel])
            if problem:
                shape.append({"path": rel, "problem": problem})
    non_idempotent = []
    for rel in sorted(again):
        if again[rel] != fixed.get(rel):
            diff = "".join(
                difflib.unified_diff(
                    fixed.get(rel, b"").decode("utf-8", "replace").splitlines(keepends=True),
                    again[rel].decode("utf-8", "replace").splitlines(keepends=True),
                    fromfile=rel,
                    tofile=rel,
                )
            )
            non_idempotent.append({"path": rel, "diff": diff[:4000]})
    # The API run and the CLI agree on every file.
    mismatch = []
    for rel, rec in recorded.items():
        cli_sha = hashlib.sha1(fixed[rel]).hexdigest() if fixed[rel] != original[rel] else None
        if rec["new_sha"] != cli_sha:
            mismatch.append(rel)
    broken_lineage = sorted(rel for rel, rec in recorded.items() if not rec["lineage_ok"])
    # Fixes applied, per rule: all files, and identical files once.
    applied: collections.Counter = collections.Counter()
    applied_unique: collections.Counter = collections.Counter()
    applied_keys: collections.Counter = collections.Counter()
    seen_unique = set()
    for rel, rec in recorded.items():
        sha = hashlib.sha1(original[rel]).hexdigest()
        for fx in rec["fixes"]:
            applied[fx["rule"]] += 1
            applied_keys[(rel, fx["rule"], fx["message"])] += 1
            if sha not in seen_unique:
                applied_unique[fx["rule"]] += 1
        seen_unique.add(sha)
    b_keys, a_keys = finding_keys(before, root), finding_keys(after, root)
    new, not_cleared = [], []
    after_by_key = collections.defaultdict(list)
    for f in after:
        after_by_key[(rel_of(root, f["filename"]), f["code"], f["message"])].append(f)
    for key, a in sorted(a_keys.items()):
        b, f = b_keys.get(key, 0), applied_keys.get(key, 0)
        if a <= max(0, b - f):
            continue
        where = [{"row": x["location"]["row"], "cell": x.get("cell")} for x in after_by_key[key]]
        entry = {
            "path": key[0],
            "rule": key[1],
            "message": key[2],
            "before": b,
            "fixed": f,
            "after": a,
            "where": where,
        }
        (new if a > b else not_cleared).append(entry)
    problems = sorted({p for rec in recorded.values() for p in rec["problems"]})
    before_rules = collections.Counter(f["code"] for f in before)
    after_rules = collections.Counter(f["code"] for f in after)
    return {
        "files": len(original),
        "files_with_fixable_findings": len(recorded),
        "files_changed": len(changed),
        "files_changed_unique": len(unique),
        "fixes_applied": dict(sorted(applied.items())),
        "fixes_applied_unique_files": dict(sorted(applied_unique.items())),
        "findings_before": dict(sorted(before_rules.items())),
        "findings_after": dict(sorted(after_rules.items())),
        "unparsable": unparsable,
        "notebook_shape": shape,
        "non_idempotent": non_idempotent,
        "new_findings": new,
        "not_cleared": not_cleared,
        "api_cli_mismatch": sorted(mismatch),
        "broken_lineage": broken_lineage,
        "fix_problems": problems,
        "cli_stderr": (fix_proc.stderr or "")[-2000:],
        "cli_stderr_again": (again_proc.stderr or "")[-2000:],
    }


def unique_fixes(recorded: Dict[str, dict], original: Dict[str, bytes]) -> Dict[str, List[Tuple[str, dict]]]:
    """Applied fixes per rule, the same fix in an identical file (another checkout) once."""
    pools: Dict[str, List[Tuple[str, dict]]] = collections.defaultdict(list)
    seen = set()
    for rel in sorted(recorded):
        sha = hashlib.sha1(original[rel]).hexdigest()
        for fx in recorded[rel]["fixes"]:
            key = (sha, fx["rule"], fx["pass"], json.dumps(fx["edits"]))
            if key in seen:
                continue  # the same file in another checkout
            seen.add(key)
            pools[fx["rule"]].append((rel, fx))
    return pools


def write_sample(recorded: Dict[str, dict], original: Dict[str, bytes], seed: int, per_rule: int, out: Path) -> dict:
    pools = unique_fixes(recorded, original)
    rng = random.Random(seed)
    rows, counts = [], {}
    for rule in sorted(pools):
        pool = pools[rule]
        picked = pool if len(pool) <= per_rule else rng.sample(pool, per_rule)
        picked.sort(key=lambda p: (p[0], p[1]["pass"], p[1]["row"]))
        counts[rule] = {"unique_fixes": len(pool), "sampled": len(picked)}
        rows += [sample_row(fx, rel) for rel, fx in picked]
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return {"path": str(out), "seed": seed, "per_rule": per_rule, "rules": counts, "rows": len(rows)}


# -- the judging sheet: a seeded sample of edit groups --------------------------------------------

FIX_VERDICTS = ("correct", "no-benefit", "wrong")
SHEET_GUIDE = """Judge each edit group (one fix: the edits one finding's fix made together) as

- **correct**: it keeps what the code does (on the CPU and on a GPU) and saves work
  where the code runs often (every batch, every step) or allocates a lot;
- **no-benefit**: it keeps what the code does but saves nothing worth an edit (code
  that runs once, a tiny allocation, a sync that stays in the iteration anyway);
- **wrong**: it changes what the code does: a crash (on the CPU or on a GPU), other
  numbers or output, a lost notebook display, broken layout or code.

Read the diff in the context given, and the file itself where needed. The runs
(CPU and simulated accelerator, before and after the fix, of the whole file with
every fix) are evidence, not the verdict: a file that cannot run here says
nothing. Write one JSON object per line to verdicts.jsonl in this folder:
{"id": "G01", "verdict": "correct" | "no-benefit" | "wrong", "reason": "..."}
then: python bench/fix_audit.py --tally THIS_FOLDER
"""


def draw_groups(recorded: Dict[str, dict], original: Dict[str, bytes], seed: int, count: int) -> List[Tuple[str, dict]]:
    """A seeded, uniform sample of `count` unique edit groups over every rule
    (the same fix in an identical file counted once), in path order."""
    pool = [item for _rule, items in sorted(unique_fixes(recorded, original).items()) for item in items]
    rng = random.Random(seed)
    picked = pool if len(pool) <= count else rng.sample(pool, count)
    picked.sort(key=lambda p: (p[0], p[1]["pass"], p[1]["row"]))
    return picked


def group_diff(fx: dict, rel: str) -> str:
    """The edit group as a unified diff: of the file, or for a notebook of
    that cell's source (headed `path:cell N`, rows within the cell)."""
    before, after = fx["before"], fx["after"]
    label = rel
    if fx["cell"] is not None and fx.get("cell_span"):
        start, length = fx["cell_span"]
        grown = len(after.splitlines()) - len(before.splitlines())
        before = "".join(before.splitlines(keepends=True)[start - 1 : start - 1 + length])
        after = "".join(after.splitlines(keepends=True)[start - 1 : start - 1 + length + grown])
        label = f"{rel}:cell {fx['cell']}"
    return "".join(
        difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True), label, label, n=3)
    )


def group_context(fx: dict, radius: int = 25) -> str:
    """The lines around the edit before it was made (a notebook: within its cell,
    numbered as in the cell), the changed ones marked with `>`."""
    before, after = fx["before"], fx["after"]
    _, lo, hi = _changed_rows(before, after)
    lines = before.splitlines()
    first, last, offset = 1, len(lines), 0
    if fx["cell"] is not None and fx.get("cell_span"):
        start, length = fx["cell_span"]
        first, last, offset = start, start + length - 1, start - 1
    a, b = max(first, lo - radius), min(last, hi + radius)
    return "\n".join(f"{'>' if lo <= i <= hi else ' '}{i - offset:5} {lines[i - 1]}" for i in range(a, b + 1))


def write_sheet(
    recorded: Dict[str, dict], original: Dict[str, bytes], opts: Options, runs: Optional[dict], command
) -> dict:
    """sheet.md (for the judges), groups.jsonl (the same, for tools) and an
    empty verdicts.jsonl in `opts.sheet`, outside the repository."""
    assert opts.sheet is not None
    out = opts.sheet
    out.mkdir(parents=True, exist_ok=True)
    picked = draw_groups(recorded, original, opts.seed, opts.groups)
    per_file = {f["path"]: f for f in (runs or {}).get("per_file", [])}
    counts = collections.Counter(fx["rule"] for _, fx in picked)
    total = sum(len(v) for v in unique_fixes(recorded, original).values())
    md = [
        f"# Fix audit: judging sheet ({len(picked)} of {total} unique edit groups, seed {opts.seed})\n\n",
        f"Repositories: {', '.join(opts.repos) if opts.repos else 'every folder of the corpus'}\n\n",
        f"Fix command: `{command['fix']}`\n\n",
        "Groups per rule: " + ", ".join(f"{r} {n}" for r, n in sorted(counts.items())) + "\n\n",
        SHEET_GUIDE,
    ]
    rows = []
    for number, (rel, fx) in enumerate(picked, 1):
        gid = f"G{number:02d}"
        where = f"{rel}:{fx['line']}" + (f" (cell {fx['cell']})" if fx["cell"] is not None else "")
        run = per_file.get(rel)
        row = {
            "id": gid,
            "rule": fx["rule"],
            "applicability": fx["applicability"],
            "repo": rel.split("/", 1)[0],
            "path": rel,
            "line": fx["line"],
            "cell": fx["cell"],
            "message": fx["message"],
            "runs_per_step": fx.get("runs"),
            "diff": group_diff(fx, rel),
            "context": group_context(fx),
            "file_runs": {k: run[k] for k in ("cpu", "accelerator")} if run else None,
        }
        rows.append(row)
        md.append(f"\n---\n\n## {gid} {fx['rule']} ({fx['applicability']}) {where}\n\n")
        md.append(f"finding: {fx['message']}\n\n")
        if fx.get("runs"):
            md.append(f"the code fixed runs: {fx['runs']} (torchlint's cost fact)\n\n")
        if run:
            for mode in ("cpu", "accelerator"):
                r = run[mode]
                md.append(
                    f"run of the whole file, {mode}: {r['verdict']}"
                    + (f" ({r['detail']})" if r["detail"] else "")
                    + "\n\n"
                )
        md.append("```diff\n" + row["diff"] + "```\n\n")
        md.append("context (before the fix):\n\n```\n" + row["context"] + "\n```\n")
    (out / "sheet.md").write_text("".join(md), encoding="utf-8")
    with (out / "groups.jsonl").open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    verdicts = out / "verdicts.jsonl"
    if not verdicts.exists():
        verdicts.write_text("", encoding="utf-8")
    return {
        "folder": str(out),
        "seed": opts.seed,
        "groups": len(rows),
        "of": total,
        "per_rule": dict(sorted(counts.items())),
    }


def tally(folder: Path) -> Tuple[dict, List[str]]:
    """Per rule: correct, no-benefit and wrong verdicts of a judged sheet; and
    the problems (groups not judged, unknown verdicts)."""
    groups = [json.loads(x) for x in (folder / "groups.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
    vpath = folder / "verdicts.jsonl"
    verdicts = (
        [json.loads(x) for x in vpath.read_text(encoding="utf-8").splitlines() if x.strip()] if vpath.exists() else []
    )
    by_id = {v["id"]: v for v in verdicts}
    problems = []
    table: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for g in groups:
        v = by_id.get(g["id"])
        if v is None:
            problems.append(f"{g['id']} is not judged")
            continue
        if v.get("verdict") not in FIX_VERDICTS:
            problems.append(f"{g['id']}: verdict {v.get('verdict')!r} is not one of {FIX_VERDICTS}")
            continue
        table[g["rule"]][v["verdict"]] += 1
    extra = sorted(set(by_id) - {g["id"] for g in groups})
    if extra:
        problems.append(f"verdicts for groups not in the sheet: {extra}")
    total = collections.Counter()
    for counter in table.values():
        total.update(counter)
    judged = sum(total.values())
    summary = {
        "rules": {rule: {k: table[rule][k] for k in FIX_VERDICTS} for rule in sorted(table)},
        "all": {k: total[k] for k in FIX_VERDICTS},
        "judged": judged,
        "no_benefit_share": round(total["no-benefit"] / judged, 3) if judged else None,
    }
    summary["meets_bar"] = bool(judged) and total["wrong"] == 0 and total["no-benefit"] <= 0.10 * judged
    return summary, problems


def print_tally(summary: dict, problems: List[str]) -> None:
    print(f"{'rule':6} {'correct':>8} {'no-benefit':>11} {'wrong':>6}")
    for rule, c in summary["rules"].items():
        print(f"{rule:6} {c['correct']:8} {c['no-benefit']:11} {c['wrong']:6}")
    a = summary["all"]
    share = summary["no_benefit_share"]
    print(f"{'all':6} {a['correct']:8} {a['no-benefit']:11} {a['wrong']:6}")
    print(
        f"judged: {summary['judged']}  no-benefit share: {share}  bar (0 wrong, <= 10% no-benefit): "
        + ("met" if summary["meets_bar"] else "NOT met")
    )
    for p in problems:
        print("problem:", p)


def print_report(r: dict) -> None:
    print(f"files: {r['files']}  with fixable findings: {r['files_with_fixable_findings']}  ", end="")
    print(f"changed: {r['files_changed']} ({r['files_changed_unique']} unique contents)")
    print(f"{'rule':6} {'before':>6} {'fixes':>6} {'unique':>6} {'after':>6}")
    for code in sorted(set(r["findings_before"]) | set(r["fixes_applied"]) | set(r["findings_after"])):
        print(
            f"{code:6} {r['findings_before'].get(code, 0):6} {r['fixes_applied'].get(code, 0):6} "
            f"{r['fixes_applied_unique_files'].get(code, 0):6} {r['findings_after'].get(code, 0):6}"
        )
    for name in ("unparsable", "notebook_shape", "non_idempotent", "new_findings", "not_cleared"):
        print(f"{name}: {len(r[name])}")
        for entry in r[name]:
            print("   ", json.dumps(entry)[:600])
    print(f"api/cli mismatches: {len(r['api_cli_mismatch'])} {r['api_cli_mismatch'][:10]}")
    print(f"broken lineage: {len(r['broken_lineage'])} {r['broken_lineage'][:10]}")
    print(f"fix problems: {len(r['fix_problems'])}")
    for p in r["fix_problems"]:
        print("   ", p)
    if "sample" in r:
        s = r["sample"]
        print(f"sample: {s['rows']} fixes (seed {s['seed']}, up to {s['per_rule']} per rule) -> {s['path']}")
        for rule, c in s["rules"].items():
            print(f"   {rule}: {c['sampled']} of {c['unique_fixes']} unique fixes")
    if r.get("no_benefit_candidates"):
        print("fixes at code that runs once (candidates for no-benefit), by rule:")
        for rule, c in r["no_benefit_candidates"].items():
            print(f"   {rule}: {c['at_code_that_runs_once']} of {c['unique_fixes']} unique fixes")
    if "runs" in r:
        runs = r["runs"]
        print(f"runs of the {runs['files']} changed files, before and after (limit {runs['timeout_s']} s each):")
        for mode in ("cpu", "accelerator"):
            print(f"   {mode}: " + ", ".join(f"{k} {v}" for k, v in runs[mode].items()))
        print(f"   new crashes on the simulated accelerator: {runs['accelerator_new_crashes']}")
        print(f"   wrong edits (runs that changed), by rule: {runs['wrong_by_rule'] or 'none'}")
        for w in runs["wrong"]:
            print("   ", json.dumps(w)[:600])
        print(f"   to review (both fail at the same place, differently): {len(runs['review'])}")
        for w in runs["review"]:
            print("   ", json.dumps(w)[:600])
    if "sheet" in r:
        sh = r["sheet"]
        print(f"judging sheet: {sh['groups']} of {sh['of']} unique edit groups (seed {sh['seed']}) -> {sh['folder']}")


def failed(r: dict) -> bool:
    keys = ("unparsable", "notebook_shape", "non_idempotent", "new_findings", "not_cleared", "api_cli_mismatch")
    return any(r[k] for k in keys) or bool(r["broken_lineage"]) or bool(r.get("runs", {}).get("wrong"))


def _names(text: Optional[str], file: Optional[Path]) -> Optional[List[str]]:
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if file is not None:
        names += [n.strip() for n in file.read_text().splitlines() if n.strip() and not n.startswith("#")]
    return names or None


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder of restored repositories (read only)")
    ap.add_argument("--repos", help="only these repository folders of the corpus (comma-separated owner__name)")
    ap.add_argument("--repos-file", type=Path, help="only the repository folders listed in this file, one per line")
    ap.add_argument("--seed", type=int, default=7, help="seed of the samples")
    ap.add_argument(
        "--stable-only", action="store_true", help="only the stable rules (default: every rule, preview included)"
    )
    ap.add_argument("--per-rule", type=int, default=10, help="fixes sampled per rule (default 10)")
    ap.add_argument("--sample-out", type=Path, help="JSONL sample of fixes with context (keep it outside the repo)")
    ap.add_argument("--groups", type=int, default=0, help="edit groups to draw for the judging sheet (seeded, uniform)")
    ap.add_argument(
        "--sheet", type=Path, help="folder for the judging sheet (outside the repo): sheet.md, groups.jsonl"
    )
    ap.add_argument("--run", action="store_true", help="run every changed file before and after (CPU, accelerator)")
    ap.add_argument("--run-timeout", type=int, default=120, help="seconds per run (default 120)")
    ap.add_argument("--run-jobs", type=int, default=2, help="runs at once (default 2)")
    ap.add_argument("--run-memory-gb", type=int, default=6, help="address space per run, GiB (0: no limit)")
    ap.add_argument(
        "--no-fake-data", action="store_true", help="runs get no synthetic torchvision image sets (MNIST, CIFAR10...)"
    )
    ap.add_argument("--tally", type=Path, metavar="SHEET", help="tally a judged sheet's verdicts by rule and exit")
    ap.add_argument("--json", type=Path, help="also write the full report as JSON")
    ap.add_argument("--fixes-out", type=Path, help="JSONL of every applied fix with context (outside the repo)")
    ap.add_argument("--jobs", type=int, default=0, help="processes for the instrumented run (0: one per core)")
    ap.add_argument("--keep", action="store_true", help="keep the fixed copy (its path goes to stderr)")
    ap.add_argument(
        "--torchlint",
        default=f"{shlex.quote(sys.executable)} -m torchlint",
        help="command that runs torchlint (default: this Python's -m torchlint)",
    )
    args = ap.parse_args(argv)
    if args.tally is not None:
        summary, problems = tally(args.tally)
        print_tally(summary, problems)
        if args.json:
            args.json.write_text(json.dumps(summary, indent=2) + "\n")
        return 0 if summary["meets_bar"] and not problems else 1
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus} (restore it with ../shared/corpus/restore.sh)")
    for out in (args.sample_out, args.fixes_out, args.sheet):
        if out is not None and (PROJECT == out.resolve() or PROJECT in out.resolve().parents):
            raise SystemExit("write samples outside the repository: they hold third-party code")
    if args.groups and args.sheet is None:
        raise SystemExit("--groups needs --sheet FOLDER")
    opts = Options(
        seed=args.seed,
        preview=not args.stable_only,
        per_rule=args.per_rule,
        sample_out=args.sample_out,
        jobs=args.jobs,
        keep=args.keep,
        fixes_out=args.fixes_out,
        repos=_names(args.repos, args.repos_file),
        run=args.run,
        run_timeout=args.run_timeout,
        run_jobs=args.run_jobs,
        run_memory_gb=args.run_memory_gb,
        fake_data=not args.no_fake_data,
        groups=args.groups,
        sheet=args.sheet,
    )
    report = audit(args.corpus, args.torchlint, opts)
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
