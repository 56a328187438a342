"""Every verdict ever made, scored as a regression label on the real code.

Each judged set is a list of rows (a rule at a line of a real file, with a
verdict): the labelled corpus, every first-sight round (`docs/accuracy/rounds/`),
and the two released sets (`../shared/corpus/released/wild`, `wild2`). The
current torchlint runs (every rule, preview included) over the files the rows
are in, and each row is *reported* when it reports that rule in that file (and
notebook cell) within the row's statement (notebooks: within 2 rows), as the
released sets' own scorers read them. Per set:

  false-kept    rows judged false that are still reported   (want: few)
  true-kept     rows judged true that are still reported    (want: all)
  unclear-kept  rows judged unclear that are still reported
  missed-found  instances found in files read in full that are reported
                (in brackets: of those missed when judged, how many now)

A round judged with guide v2 counted a true but one-off finding as right;
guide v3 (`../shared/corpus/JUDGING.md`) does not. Where a round has
`v3.jsonl` (each v2-true row and recall instance judged again under v3), its
figures use the v3 verdicts, and the line says how many rows changed. The
released sets' files are read, never changed.

    python bench/regress.py                     # every set restored beside the project
    python bench/regress.py --set wild2 --verbose   # the rows that fail, with their reasons
"""

from __future__ import annotations

import argparse
import collections
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

try:
    from bench import rounds
    from bench.spans import statement_span
except ImportError:  # run as a script: bench/ is on sys.path
    import rounds  # type: ignore[no-redef]
    from spans import statement_span  # type: ignore[no-redef]

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared" / "corpus"
RELEASED = SHARED / "released"

TRUE, FALSE, UNCLEAR, INSTANCE = "true", "false", "unclear", "instance"


@dataclass(frozen=True)
class Row:
    """One judged row: a rule claimed (or to be claimed) at a line of a file."""

    root: Path  # the checkout the path is relative to
    path: str
    line: int
    cell: Optional[int]
    rule: str
    truth: str  # TRUE / FALSE / UNCLEAR for judged findings, INSTANCE for recall
    reason: str
    missed_then: bool = False  # an instance the judged version did not report
    changed: bool = False  # a v2-true row that guide v3 judges false
    helper_calls: bool = False  # also matched by a finding on a line calling the row's function


@dataclass
class Tally:
    false_kept: int = 0
    false_all: int = 0
    true_kept: int = 0
    true_all: int = 0
    unclear_kept: int = 0
    found: int = 0
    instances: int = 0
    found_of_missed: int = 0
    missed_then: int = 0
    changed: int = 0
    changed_kept: int = 0

    def add(self, row: Row, hit: bool) -> None:
        if row.truth == INSTANCE:
            self.instances += 1
            self.found += hit
            if row.missed_then:
                self.missed_then += 1
                self.found_of_missed += hit
        elif row.truth == TRUE:
            self.true_all += 1
            self.true_kept += hit
        elif row.truth == FALSE:
            self.false_all += 1
            self.false_kept += hit
        else:
            self.unclear_kept += hit
        if row.changed:
            self.changed += 1
            self.changed_kept += hit

    def merge(self, other: "Tally") -> None:
        for name in vars(self):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def failing(self, row: Row, hit: bool) -> bool:
        return (row.truth == FALSE and hit) or (row.truth in (TRUE, INSTANCE) and not hit)


@dataclass(frozen=True)
class JudgedSet:
    name: str
    rows: Tuple[Row, ...]
    files: Tuple[Path, ...]  # what torchlint lints for this set


def _jsonl(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _code_files(folder: Path) -> List[Path]:
    return sorted(f for f in folder.rglob("*") if f.suffix in (".py", ".ipynb") and f.is_file())


# -- the sets ----------------------------------------------------------------------


def _wild_dirs() -> Dict[str, str]:
    dirs = {}
    for line in (RELEASED / "wild" / "checkouts.tsv").read_text().splitlines()[1:]:
        d, repo = line.split("\t")[:2]
        dirs[repo] = d
    return dirs


def wild_set(root: Path) -> JudgedSet:
    """`released/wild`: precision-sample rows (tp/fp/unclear) and recall-read rows
    (tp found then, fn missed then)."""
    dirs = _wild_dirs()
    rows: List[Row] = []
    for r in _jsonl(RELEASED / "wild" / "labels.jsonl"):
        if r["source"] not in ("precision-sample", "recall-read"):
            continue
        base = root / dirs[r["repo"]]
        v = r["verdict"]
        truth = {"tp": TRUE, "fp": FALSE, "unclear": UNCLEAR}.get(v, INSTANCE)
        if r["source"] == "recall-read":
            truth = INSTANCE
        rows.append(Row(base, r["path"], r["line"], r.get("cell"), r["rule"], truth, r["why"], missed_then=v == "fn"))
        if r["source"] == "recall-read" and v == "tp":  # a true finding then: also a true row
            rows.append(Row(base, r["path"], r["line"], r.get("cell"), r["rule"], TRUE, r["why"]))
    files = [f for d in sorted(set(dirs.values())) for f in _code_files(root / d)]
    return JudgedSet("wild", tuple(rows), tuple(files))


def wild_turn4_set(root: Path) -> JudgedSet:
    """`released/wild/judged-turn4.jsonl`: findings of a later version judged on the same code."""
    rows: List[Row] = []
    for r in _jsonl(RELEASED / "wild" / "judged-turn4.jsonl"):
        d, _, rel = r["path"].partition("/")
        truth = {"tp": TRUE, "fp": FALSE}.get(r["verdict"], UNCLEAR)
        rows.append(Row(root / d, rel, r["line"], r.get("cell"), r["rule"], truth, r["reason"]))
    files = [f for d in sorted(set(_wild_dirs().values())) for f in _code_files(root / d)]
    return JudgedSet("wild-turn4", tuple(rows), tuple(files))


def wild2_set(root: Path) -> JudgedSet:
    """`released/wild2`: sampled findings (tp/fp/unclear) and recall instances."""
    here = RELEASED / "wild2"
    dirs = [line.split("\t")[0] for line in (here / "checkouts.tsv").read_text().splitlines()[1:] if line.strip()]
    rows: List[Row] = []
    for r in _jsonl(here / "judged.jsonl"):
        if r.get("source") != "sample" or r.get("rule") in (None, "TL000"):
            continue
        truth = {"tp": TRUE, "fp": FALSE}.get(r["verdict"], UNCLEAR)
        rows.append(Row(root / r["dir"], r["path"], r["line"], r.get("cell"), r["rule"], truth, r["reason"]))
    for r in _jsonl(here / "recall.jsonl"):
        if not r.get("rule"):
            continue
        rows.append(
            Row(
                root / r["dir"],
                r["path"],
                r["line"],
                r.get("cell"),
                r["rule"],
                INSTANCE,
                r.get("note", ""),
                missed_then=r.get("found") is False,
            )
        )
    files = [f for d in dirs for f in _code_files(root / d)]
    return JudgedSet("wild2", tuple(rows), tuple(files))


def _v3_relabels(folder: Path) -> Tuple[Dict[str, dict], Dict[Tuple[str, str, int, str], dict]]:
    """A round's guide-v3 verdicts of its v2-true rows (by id) and recall instances."""
    by_id: Dict[str, dict] = {}
    by_instance: Dict[Tuple[str, str, int, str], dict] = {}
    path = folder / "v3.jsonl"
    if path.is_file():
        for r in _jsonl(path):
            if r["kind"] == "verdict":
                by_id[r["id"]] = r
            else:
                by_instance[(r["repo"], r["path"], r["line"], r["rule"])] = r
    return by_id, by_instance


def round_set(folder: Path, pool: Path) -> Optional[JudgedSet]:
    """A first-sight round: its judged sample and its recall instances, in v3 terms
    where the round has `v3.jsonl`."""
    meta = json.loads((folder / "round.json").read_text(encoding="utf-8"))
    verdicts_path = folder / "verdicts.jsonl"
    if not verdicts_path.is_file():
        return None
    where = {s["id"]: s for s in meta["sampled"]}
    v3_ids, v3_instances = _v3_relabels(folder)
    rows: List[Row] = []
    for v in _jsonl(verdicts_path):
        s = where[v["id"]]
        truth = {"tp": TRUE, "fp": FALSE}.get(v["verdict"], UNCLEAR)
        changed = False
        relabel = v3_ids.get(v["id"])
        if truth == TRUE and relabel:
            truth = {"tp": TRUE, "fp": FALSE}.get(relabel["v3"], UNCLEAR)
            changed = truth != TRUE
        base = pool / s["repo"].replace("/", "__")
        reason = v.get("reason", "") + (f" [v3: {relabel['reason']}]" if changed and relabel else "")
        rows.append(Row(base, s["path"], s["line"], s.get("cell"), s["rule"], truth, reason, changed=changed))
    recall_path = folder / "recall.json"
    if recall_path.is_file():
        for inst in json.loads(recall_path.read_text(encoding="utf-8")).get("instances", []):
            relabel = v3_instances.get((inst["repo"], inst["path"], inst["line"], inst["rule"]))
            if relabel and relabel["v3"] != "tp":
                continue  # not an instance under v3: a one-off cost
            base = pool / inst["repo"].replace("/", "__")
            rows.append(
                Row(
                    base,
                    inst["path"],
                    inst["line"],
                    inst.get("cell"),
                    inst["rule"],
                    INSTANCE,
                    inst.get("why", ""),
                    missed_then=not inst.get("found"),
                    helper_calls=True,
                )
            )
    files = sorted({r.root / r.path for r in rows if (r.root / r.path).is_file()})
    return JudgedSet(folder.name, tuple(rows), tuple(files))


# -- matching ----------------------------------------------------------------------

Found = Dict[Path, List[Tuple[str, Optional[int], int]]]  # file -> (code, cell, row)


def lint(cmd: str, files: Sequence[Path]) -> Found:
    """Every rule's findings in `files` (folders, and files named explicitly)."""
    found: Found = collections.defaultdict(list)
    chunk = 2000
    for i in range(0, len(files), chunk):
        part = [str(f) for f in files[i : i + chunk]]
        argv = shlex.split(cmd) + ["check", "--output-format", "json", "--exit-zero", "--no-cache", "--preview", *part]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=PROJECT)
        try:
            items = json.loads(proc.stdout)
        except json.JSONDecodeError:
            raise SystemExit(f"torchlint printed no JSON (exit {proc.returncode}): {proc.stderr[-2000:]}") from None
        for f in items:
            found[Path(f["filename"]).resolve()].append((f["code"], f.get("cell"), f["location"]["row"]))
        for line in proc.stderr.splitlines():  # e.g. a project pass over its budget: the figures may differ
            if line.startswith("torchlint: warning:"):
                print(line, file=sys.stderr)
    return found


def _cell_text(path: Path, cell: int) -> str:
    return rounds.python_only(rounds.load_source(path, cell).text)


def reported(row: Row, found: Found) -> bool:
    """Whether a finding of the row's rule lies in the row's statement."""
    path = (row.root / row.path).resolve()
    hits = [(cell, line) for code, cell, line in found.get(path, []) if code == row.rule]
    if not path.is_file():
        return False
    if row.path.endswith(".ipynb"):
        if any(cell == row.cell and abs(line - row.line) <= 2 for cell, line in hits):
            return True
    else:
        text = path.read_text(encoding="utf-8", errors="replace")
        lo, hi = statement_span(text, row.line)
        if any(lo <= line <= hi for _, line in hits):
            return True
    if not row.helper_calls:
        return False
    # A round's recall counted a finding where the loop calls the instance's helper
    # (bench/rounds.match_recall): the same here.
    text = _cell_text(path, row.cell) if row.cell is not None else path.read_text(encoding="utf-8", errors="replace")
    fn = rounds.enclosing_function(rounds._parse(text), row.line)
    name = getattr(fn, "name", None)
    if not name:
        return False
    for cell, line in hits:
        lines = (_cell_text(path, cell) if cell is not None else text).splitlines()
        if 0 < line <= len(lines) and f"{name}(" in lines[line - 1]:
            return True
    return False


# -- the report --------------------------------------------------------------------


def _ratio(a: int, b: int) -> str:
    return f"{a}/{b}" if b else "-"


def line_of(name: str, t: Tally) -> str:
    missed = f" (of missed then: {_ratio(t.found_of_missed, t.missed_then)})" if t.missed_then else ""
    changed = f"  v2-true now v3-false: {t.changed} ({t.changed_kept} kept)" if t.changed else ""
    return (
        f"{name:12} false-kept {_ratio(t.false_kept, t.false_all):>7}  true-kept {_ratio(t.true_kept, t.true_all):>7}"
        f"  unclear-kept {t.unclear_kept:3}  missed-found {_ratio(t.found, t.instances):>7}{missed}{changed}"
    )


def score_set(judged: JudgedSet, found: Found, verbose: bool, out: Callable[[str], None] = print) -> Tally:
    tally = Tally()
    failing = []
    for row in judged.rows:
        hit = reported(row, found)
        tally.add(row, hit)
        if verbose and tally.failing(row, hit):
            what = {FALSE: "false kept", TRUE: "true lost", INSTANCE: "missed"}[row.truth]
            where = f"{row.root.name}/{row.path}" + (f" cell {row.cell}" if row.cell is not None else "")
            failing.append(f"  {what:10} {row.rule} {where}:{row.line}  {row.reason[:110]}")
    out(line_of(judged.name, tally))
    for line in sorted(failing):
        out(line)
    return tally


def corpus_line(cmd: str, verbose: bool) -> str:
    """The labelled corpus through bench/accuracy.py's scorer, in this file's terms."""
    try:
        from bench import accuracy
    except ImportError:
        import accuracy  # type: ignore[no-redef]
    result = accuracy.score(accuracy.DEFAULT_CORPUS, accuracy.DEFAULT_LABELS, cmd, verbose)
    tp = sum(f["tp"] for f in result["family"].values())
    fp = sum(f["fp"] for f in result["family"].values())
    fn = sum(f["fn"] for f in result["family"].values())
    precision = tp / (tp + fp) if tp + fp else 1.0
    return (
        f"{'corpus':12} false+ {fp}  true-kept {tp}/{tp + fn}  precision {precision:.2f}  recall {tp / (tp + fn):.2f}"
    )


def sets(names: Iterable[str], pool: Path, wild: Path, wild2: Path) -> List[JudgedSet]:
    out: List[JudgedSet] = []
    for name in names:
        if name == "wild":
            if wild.is_dir():
                out.append(wild_set(wild))
                out.append(wild_turn4_set(wild))
        elif name == "wild2":
            if wild2.is_dir():
                out.append(wild2_set(wild2))
        elif name == "rounds" or name.startswith("round-"):
            for folder in sorted(rounds.ROUNDS.glob("round-*"), key=lambda p: int(p.name.split("-")[1])):
                if name in ("rounds", folder.name):
                    judged = round_set(folder, pool)
                    if judged:
                        out.append(judged)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--torchlint", default=f"{shlex.quote(sys.executable)} -m torchlint")
    ap.add_argument(
        "--set", action="append", help="corpus, wild, wild2, rounds, or round-N (default: all)", dest="names"
    )
    ap.add_argument("--pool", type=Path, default=rounds.DEFAULT_POOL)
    ap.add_argument("--wild", type=Path, default=PROJECT.parent / "corpus-wild")
    ap.add_argument("--wild2", type=Path, default=PROJECT.parent / "corpus-wild2")
    ap.add_argument("--verbose", action="store_true", help="list every row that fails")
    args = ap.parse_args(argv)
    names = args.names or ["corpus", "wild", "wild2", "rounds"]
    if "corpus" in names:
        print(corpus_line(args.torchlint, args.verbose))
    judged_sets = sets([n for n in names if n != "corpus"], args.pool, args.wild, args.wild2)
    # Each repository whole, as a round runs it (a fact about the project, such as a
    # function no file calls, needs every file), and the rows' files by name (a folder
    # a .gitignore names would otherwise be skipped).
    folders = sorted({r.root.resolve() for s in judged_sets for r in s.rows if r.root.is_dir()})
    files = sorted({f.resolve() for s in judged_sets for f in s.files})
    found = lint(args.torchlint, [*folders, *files]) if files else {}
    total = Tally()
    first_six = Tally()
    counted = 0
    for judged in judged_sets:
        t = score_set(judged, found, args.verbose)
        if judged.name.startswith("round-"):
            total.merge(t)
            counted += 1
            if int(judged.name.split("-")[1]) <= 6:
                first_six.merge(t)
    if counted > 1:
        print(line_of("rounds 1-6", first_six))
        print(line_of("all rounds", total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
