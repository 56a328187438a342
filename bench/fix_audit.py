"""Fix audit: does `torchlint --fix --unsafe-fixes` leave real code intact?

Copies a corpus of restored third-party repositories (default `../corpus`,
see `../shared/corpus/README.md`) to a temporary folder and runs the CLI
over the copy, as a user would:

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
text it was applied to (also fixes applied in later passes). That run must
produce the same bytes as the CLI; a difference is reported.

Finally a reproducible sample (seeded; up to `--per-rule` fixes per rule,
identical files counted once) is written as JSONL for a person to judge:
each row has the rule, path, line, applicability, the edit, a unified diff
hunk and the surrounding lines. Keep it outside the repository (it holds
third-party code).

    python bench/fix_audit.py --corpus ../corpus --seed 7 --sample-out ../accuracy-work/fix-sample.jsonl

Exit status: 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import hashlib
import json
import multiprocessing
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
DEFAULT_CORPUS = PROJECT.parent / "corpus"
SUFFIXES = (".py", ".ipynb")


# -- the CLI -------------------------------------------------------------------------------


def run_cli(cmd: str, args: List[str]) -> subprocess.CompletedProcess:
    argv = shlex.split(cmd) + ["check", "--no-cache", "--exit-zero", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=PROJECT)


def lint(cmd: str, root: Path) -> List[dict]:
    proc = run_cli(cmd, ["--output-format", "json", str(root)])
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"torchlint printed no JSON (exit {proc.returncode})") from None


def fix(cmd: str, root: Path) -> subprocess.CompletedProcess:
    proc = run_cli(cmd, ["--fix", "--unsafe-fixes", "--quiet", "--output-format", "concise", str(root)])
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
    from torchlint import fix_loop, notebook

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
    from torchlint import notebook
    from torchlint.decode import decode_source

    if is_nb:
        cells = notebook.read(data)
        return cells.source if cells is not None else None
    text = decode_source(data).text
    return text[1:] if text.startswith("\ufeff") else text


def instrumented_fix(item: Tuple[str, str, bytes]) -> dict:
    """Fix one file's contents through the API, recording every applied fix."""
    from torchlint import api, notebook
    from torchlint.fixes import apply_fix_groups

    _install_recorder()
    rel, path, data = item
    is_nb = rel.endswith(".ipynb")
    _STATE["offered"] = {}
    _STATE["lineage"] = {}
    outcome = api.process_bytes(data, path, mode="fix", unsafe=True)
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
    for number, (parent, applied) in enumerate(steps, 1):
        for edits, finding in applied:
            text = parent.source
            fixed, _ = apply_fix_groups(text, [edits])
            row = finding.row if finding is not None else edits[0].row
            cell, cell_row = None, row
            if isinstance(parent, notebook.Cells):
                i, cell_row = parent.locate(row)
                cell = parent.cells[i].number
            result["fixes"].append(
                {
                    "rule": finding.code if finding is not None else "?",
                    "message": finding.message if finding is not None else "",
                    "applicability": str(finding.fix.applicability) if finding is not None and finding.fix else "?",
                    "row": row,
                    "line": cell_row,
                    "cell": cell,
                    "pass": number,
                    "edits": [[e.row, e.column, e.end_row, e.end_column, e.content] for e in edits],
                    "before": text,
                    "after": fixed,
                }
            )
    return result


# -- checks ----------------------------------------------------------------------------------


def compiles(data: bytes, rel: str) -> Tuple[bool, str]:
    """Whether the file's Python compiles (a notebook: its code cells, IPython blanked)."""
    from torchlint import notebook
    from torchlint.decode import decode_source

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


# -- main ------------------------------------------------------------------------------------


def audit(
    corpus: Path,
    cmd: str,
    seed: int,
    per_rule: int,
    sample_out: Optional[Path],
    jobs: int,
    keep: bool,
    fixes_out: Optional[Path] = None,
) -> dict:
    corpus = corpus.resolve()
    work = Path(tempfile.mkdtemp(prefix="torchlint-fix-audit-"))
    root = work / "corpus"
    try:
        shutil.copytree(corpus, root, symlinks=True)
        original = snapshot(root)
        before = lint(cmd, root)
        fixable = sorted({rel_of(root, f["filename"]) for f in before if f.get("fix")})
        items = [(rel, str(root / rel), original[rel]) for rel in fixable if rel in original]
        ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)
        with ctx.Pool(jobs or os.cpu_count() or 1) as pool:
            recorded = {r["rel"]: r for r in pool.map(instrumented_fix, items, chunksize=1)}
        fix_proc = fix(cmd, root)
        fixed = snapshot(root)
        after = lint(cmd, root)
        again_proc = fix(cmd, root)
        again = snapshot(root)
        report = check(root, original, fixed, again, before, after, recorded, fix_proc, again_proc)
        report["command"] = {
            "lint": f"{cmd} check --no-cache --exit-zero --output-format json CORPUS_COPY",
            "fix": f"{cmd} check --no-cache --exit-zero --fix --unsafe-fixes --quiet CORPUS_COPY",
        }
        if sample_out is not None:
            report["sample"] = write_sample(recorded, original, seed, per_rule, sample_out)
        if fixes_out is not None:
            with fixes_out.open("w", encoding="utf-8") as fh:
                for _rule, pool in sorted(unique_fixes(recorded, original).items()):
                    for rel, fx in pool:
                        fh.write(json.dumps(sample_row(fx, rel)) + "\n")
        return report
    finally:
        if keep:
            print(f"kept the fixed copy in {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


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


def failed(r: dict) -> bool:
    keys = ("unparsable", "notebook_shape", "non_idempotent", "new_findings", "not_cleared", "api_cli_mismatch")
    return any(r[k] for k in keys) or bool(r["broken_lineage"])


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="folder of restored repositories (read only)")
    ap.add_argument("--seed", type=int, default=7, help="seed of the sample")
    ap.add_argument("--per-rule", type=int, default=10, help="fixes sampled per rule (default 10)")
    ap.add_argument("--sample-out", type=Path, help="JSONL sample of fixes with context (keep it outside the repo)")
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
    if not args.corpus.is_dir():
        raise SystemExit(f"no corpus at {args.corpus} (restore it with ../shared/corpus/restore.sh)")
    for out in (args.sample_out, args.fixes_out):
        if out is not None and PROJECT in out.resolve().parents:
            raise SystemExit("write samples outside the repository: they hold third-party code")
    report = audit(
        args.corpus, args.torchlint, args.seed, args.per_rule, args.sample_out, args.jobs, args.keep, args.fixes_out
    )
    print_report(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if failed(report) else 0


if __name__ == "__main__":
    sys.exit(main())
