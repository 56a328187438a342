"""First-sight judging rounds: torchlint on pool repositories it was never tuned on.

A round takes rows FIRST..LAST of `../shared/corpus/pool.tsv` (restored with
`../shared/corpus/restore_pool.sh` into `../pool`), runs torchlint with every
rule (preview included) over the whole repositories, draws a seeded sample (at
most 10 findings per rule, all of them where there are fewer) and writes a
judging sheet: each finding with the code a judge needs (the whole enclosing
function, the same-file helpers it calls; for notebooks the neighbouring cells
and whether the statement is the cell's displayed last expression) and its
offered fix as a diff.

The sheet carries third-party code, so it is written outside the repository
(`--out`, e.g. `../accuracy-work/round-1`). What is committed, under
`docs/accuracy/rounds/round-N/`:

  round.json      rows, repositories, commits, seed, torchlint commit, counts
                  per rule, and the sampled findings (no code)
  verdicts.jsonl  one row per sampled finding, written by the judge: id,
                  verdict (tp/fp/unclear), reason, fix (correct/no-benefit/
                  wrong, or null where no fix was offered), fix_reason
  recall.json     files read in full and every instance a careful engineer
                  would flag in them: {"files": [{repo, path}], "instances":
                  [{repo, path, line, cell, rule, found, why}]}

and `docs/accuracy/rounds/ledger.tsv`, one line per pool row ever used. A
round on a row already in the ledger is refused unless `--seen` says it is not
first sight (its round.json then says `"first_sight": false`).
"""

from __future__ import annotations

import ast
import collections
import difflib
import json
import random
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

from torchlint.rules.stability import GUIDE  # the judging guide's version (docs/accuracy.md)

if TYPE_CHECKING:
    from torchlint.rules.stability import RuleStatus

try:
    from bench.spans import statement_span
except ImportError:  # run as a script: bench/ is on sys.path
    from spans import statement_span  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
ROUNDS = PROJECT / "docs" / "accuracy" / "rounds"
LEDGER = ROUNDS / "ledger.tsv"
DEFAULT_POOL_TSV = PROJECT.parent / "shared" / "corpus" / "pool.tsv"
DEFAULT_POOL = PROJECT.parent / "pool"
PER_RULE = 10
VERDICTS = ("tp", "fp", "unclear")
FIX_VERDICTS = ("correct", "no-benefit", "wrong")
_CONTEXT_CAP = 160  # lines of one function shown before it is cut around the finding


# -- the pool and the ledger ---------------------------------------------------


@dataclass(frozen=True)
class PoolRow:
    order: int
    repo: str
    kind: str

    @property
    def folder(self) -> str:
        return self.repo.replace("/", "__")


def read_pool(pool_tsv: Path) -> List[PoolRow]:
    rows = []
    for line in pool_tsv.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip():
            order, repo, kind = line.split("\t")[:3]
            rows.append(PoolRow(int(order), repo, kind))
    return rows


@dataclass(frozen=True)
class LedgerEntry:
    order: int
    repo: str
    commit: str
    round: int
    first_sight: bool


def read_ledger(path: Path = LEDGER) -> List[LedgerEntry]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        if line.strip():
            order, repo, commit, rnd, first = line.split("\t")
            out.append(LedgerEntry(int(order), repo, commit, int(rnd), first == "yes"))
    return out


def write_ledger(entries: Sequence[LedgerEntry], path: Path = LEDGER) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["order\trepo\tcommit\tround\tfirst_sight"]
    for e in sorted(entries, key=lambda e: (e.order, e.round)):
        lines.append(f"{e.order}\t{e.repo}\t{e.commit}\t{e.round}\t{'yes' if e.first_sight else 'no'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def next_unused(pool: Sequence[PoolRow], ledger: Sequence[LedgerEntry]) -> Optional[int]:
    """The first pool row no round has used."""
    used = {e.order for e in ledger}
    return next((r.order for r in pool if r.order not in used), None)


# -- running torchlint ------------------------------------------------------------


def every_rule_flags(cmd: str) -> List[str]:
    """`--preview` where this torchlint has preview rules: a round judges every rule."""
    h = subprocess.run(shlex.split(cmd) + ["check", "--help"], capture_output=True, text=True)
    return ["--preview"] if "--preview" in h.stdout else []


def run_json(cmd: str, targets: Sequence[str]) -> List[dict]:
    argv = shlex.split(cmd) + ["check", "--output-format", "json", "--exit-zero", "--no-cache"]
    argv += every_rule_flags(cmd) + ["--unsafe-fixes", *targets]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600, cwd=PROJECT)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"torchlint printed no JSON (exit {proc.returncode}): {proc.stderr[-2000:]}") from None


def torchlint_commit() -> str:
    proc = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=PROJECT)
    dirty = subprocess.run(["git", "status", "--porcelain", "torchlint"], capture_output=True, text=True, cwd=PROJECT)
    return proc.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


# -- the code a judge needs ----------------------------------------------------------


@dataclass(frozen=True)
class Source:
    """The text a finding's rows count in: a .py file, or one notebook cell."""

    text: str
    cells: Optional[List[str]] = None  # every cell's source (code and markdown) for notebooks
    kinds: Optional[List[str]] = None  # each cell's type


def load_source(path: Path, cell: Optional[int]) -> Source:
    raw = path.read_text(encoding="utf-8", errors="replace")
    if cell is None:
        return Source(raw)
    nb = json.loads(raw)
    texts, kinds = [], []
    for c in nb.get("cells", []):
        src = c.get("source", "")
        texts.append("".join(src) if isinstance(src, list) else src)
        kinds.append(c.get("cell_type", "code"))
    return Source(texts[cell - 1], texts, kinds)


_MAGIC = re.compile(r"^\s*[%!]|^\s*\w[\w.]*\s*=\s*[!%]")


def python_only(text: str) -> str:
    """IPython syntax blanked line for line, so `ast` can read a cell."""
    lines = text.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        return "\n" * len(lines)
    return "\n".join("pass" if _MAGIC.match(ln) else ln for ln in lines)


def _parse(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _functions(tree: ast.AST) -> List[ast.AST]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _span(node: ast.AST) -> Tuple[int, int]:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])  # type: ignore[attr-defined]
    return first, node.end_lineno or node.lineno  # type: ignore[attr-defined]


def enclosing_function(tree: Optional[ast.Module], row: int) -> Optional[ast.AST]:
    """The innermost function holding `row`."""
    if tree is None:
        return None
    best = None
    for fn in _functions(tree):
        lo, hi = _span(fn)
        if lo <= row <= hi and (best is None or lo >= _span(best)[0]):
            best = fn
    return best


def numbered(lines: Sequence[str], lo: int, hi: int, mark: Iterable[int] = ()) -> str:
    marks = set(mark)
    return "\n".join(f"{'>' if i in marks else ' '}{i:5} {lines[i - 1]}" for i in range(lo, hi + 1))


def _window(lo: int, hi: int, row: int) -> Tuple[int, int]:
    """`lo..hi` cut to at most _CONTEXT_CAP lines around `row`."""
    if hi - lo + 1 <= _CONTEXT_CAP:
        return lo, hi
    start = max(lo, row - _CONTEXT_CAP * 2 // 3)
    return start, min(hi, start + _CONTEXT_CAP - 1)


def _called_names(where: ast.AST, near: Optional[Tuple[int, int]] = None) -> List[str]:
    """Names called in `where` (only on lines `near` when given), in order."""
    names: List[str] = []
    for node in ast.walk(where):
        if isinstance(node, ast.Call):
            if near is not None and not near[0] <= node.lineno <= near[1]:
                continue
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name and name not in names:
                names.append(name)
    return names


def displayed_last_expression(cell_text: str, row: int) -> bool:
    """Whether `row` lies in the cell's last statement and that statement is a
    bare expression (IPython displays its value)."""
    tree = _parse(python_only(cell_text))
    if tree is None or not tree.body:
        return False
    last = tree.body[-1]
    return isinstance(last, ast.Expr) and last.lineno <= row <= (last.end_lineno or last.lineno)


def context(path: Path, row: int, cell: Optional[int]) -> str:
    """The enclosing function (or a module-level window), the same-file
    helpers it calls (up to six), and for notebooks the neighbouring cells."""
    src = load_source(path, cell)
    lines = src.text.splitlines() or [""]
    row = min(max(row, 1), len(lines))
    tree = _parse(src.text if src.cells is None else python_only(src.text))
    fn = enclosing_function(tree, row)
    parts: List[str] = []
    if fn is not None:
        start, end = _span(fn)
        lo, hi = _window(start, end, row)
        header = ""
        if lo > start:  # cut: keep the decorators and the signature
            head_end = min(fn.body[0].lineno - 1, lo - 1) if fn.body else start  # type: ignore[attr-defined]
            header = numbered(lines, start, max(start, head_end)) + "\n   ...\n"
        parts.append(
            f"enclosing function `{fn.name}` (lines {start}-{end}, shown {lo}-{hi}):\n"  # type: ignore[attr-defined]
            + header
            + numbered(lines, lo, hi, [row])
        )
    elif src.cells is None:
        lo, hi = (1, len(lines)) if len(lines) <= _CONTEXT_CAP else (max(1, row - 60), min(len(lines), row + 40))
        parts.append(f"module level (lines {lo}-{hi} of {len(lines)}):\n" + numbered(lines, lo, hi, [row]))
    # Same-file (same-notebook) functions the flagged code calls.
    defs: Dict[str, Tuple[Optional[int], ast.AST, List[str]]] = {}
    if src.cells is None:
        for d in _functions(tree) if tree else []:
            defs.setdefault(d.name, (None, d, lines))  # type: ignore[attr-defined]
    else:
        for i, (text, kind) in enumerate(zip(src.cells, src.kinds or []), 1):
            t = _parse(python_only(text)) if kind == "code" else None
            for d in _functions(t) if t else []:
                defs.setdefault(d.name, (i, d, text.splitlines()))  # type: ignore[attr-defined]
    where: Optional[ast.AST] = fn if fn is not None else tree
    near = None if fn is not None or src.cells is not None else (row - 40, row + 10)
    called = [n for n in (_called_names(where, near) if where is not None else []) if n in defs]
    if src.cells is not None:
        assert cell is not None
        shown = displayed_last_expression(src.text, row)
        parts.append(
            f"notebook cell {cell} (the flagged statement {'IS' if shown else 'is not'} the cell's displayed last"
            f" expression):\n" + numbered(lines, 1, len(lines), [row])
        )
        for i in range(max(1, cell - 3), min(len(src.cells), cell + 2) + 1):
            if i == cell:
                continue
            kind = (src.kinds or [])[i - 1]
            body = src.cells[i - 1].rstrip()
            if kind != "code":
                body = "\n".join("# " + ln for ln in body.splitlines()[:8])
            parts.append(f"cell {i} ({kind}, {'before' if i < cell else 'after'}):\n{body}")
    for name in called[:6]:
        where_cell, d, dlines = defs[name]
        if d is fn:
            continue
        lo, hi = _window(*_span(d), d.lineno)  # type: ignore[attr-defined]
        label = f" in cell {where_cell}" if where_cell else ""
        parts.append(f"same-file helper `{name}`{label} (lines {lo}-{hi}):\n" + numbered(dlines, lo, hi))
    return "\n\n".join(parts)


def fix_diff(path: Path, finding: dict) -> Optional[str]:
    """The finding's own fix applied alone, as a unified diff of the file (or cell)."""
    fix = finding.get("fix")
    if not fix or not fix.get("edits"):
        return None
    src = load_source(path, finding.get("cell"))
    lines = src.text.splitlines(keepends=True)
    starts = [0]
    for ln in lines:
        starts.append(starts[-1] + len(ln))

    def offset(loc: dict) -> int:
        r, c = loc["row"], loc["column"]
        return (starts[r - 1] if r - 1 < len(starts) else starts[-1]) + c - 1

    new = src.text
    for edit in sorted(fix["edits"], key=lambda e: offset(e["location"]), reverse=True):
        new = new[: offset(edit["location"])] + edit["content"] + new[offset(edit["end_location"]) :]
    name = path.name + (f" (cell {finding['cell']})" if finding.get("cell") else "")
    diff = difflib.unified_diff(
        src.text.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}", n=3
    )
    return "".join(diff).rstrip("\n") or None


# -- the round ------------------------------------------------------------------


def _where(f: dict, root: Path) -> List:
    """[repo, path, line, cell] of a finding, relative to the pool."""
    rel = Path(f["filename"]).resolve().relative_to(root)
    return [rel.parts[0].replace("__", "/", 1), str(Path(*rel.parts[1:])), f["location"]["row"], f.get("cell")]


def _key(f: dict) -> Tuple[str, int, int, int]:
    return (f["filename"], f.get("cell") or 0, f["location"]["row"], f["location"]["column"])


def draw(findings: Sequence[dict], seed: int, per_rule: int = PER_RULE, min_total: int = 0) -> Dict[str, List[dict]]:
    """At most `per_rule` findings per rule, seeded; all of them where fewer. Where
    that draws fewer than `min_total`, the rest are drawn, seeded, from the
    findings left over (so a round reaches the sample size a round needs)."""
    by_rule: Dict[str, List[dict]] = collections.defaultdict(list)
    for f in findings:
        if f["code"] != "TL000":
            by_rule[f["code"]].append(f)
    rng = random.Random(seed)
    out = {}
    for code in sorted(by_rule):
        pool = sorted(by_rule[code], key=_key)
        picked = pool if len(pool) <= per_rule else rng.sample(pool, per_rule)
        out[code] = sorted(picked, key=_key)
    short = min_total - sum(len(v) for v in out.values())
    if short > 0:
        chosen = {id(f) for v in out.values() for f in v}
        rest = sorted(
            (f for v in by_rule.values() for f in v if id(f) not in chosen), key=lambda f: (f["code"], _key(f))
        )
        for f in rng.sample(rest, min(short, len(rest))):
            out[f["code"]] = sorted(out[f["code"]] + [f], key=_key)
    return out


def run_round(
    number: int,
    first: int,
    last: int,
    seed: int,
    out: Path,
    cmd: str,
    pool_tsv: Path = DEFAULT_POOL_TSV,
    pool_dir: Path = DEFAULT_POOL,
    seen: bool = False,
    record: bool = True,
    min_sample: int = 0,
    guide: str = GUIDE,
) -> dict:
    pool = [r for r in read_pool(pool_tsv) if first <= r.order <= last]
    ledger = read_ledger()
    used = {e.order: e for e in ledger}
    reused = [r for r in pool if r.order in used]
    if reused and not seen:
        names = ", ".join(f"{r.order} {r.repo} (round {used[r.order].round})" for r in reused)
        raise SystemExit(f"not first sight: pool rows already used: {names}; pass --seen to run it anyway")
    if (ROUNDS / f"round-{number}").exists() and record:
        raise SystemExit(f"docs/accuracy/rounds/round-{number} exists already")
    rows, targets = [], []
    for r in pool:
        marker = pool_dir / r.folder / ".restored"
        if not marker.is_file():
            rows.append({"order": r.order, "repo": r.repo, "kind": r.kind, "skipped": "not restored (fetch failed?)"})
            continue
        commit = marker.read_text().strip()
        rows.append({"order": r.order, "repo": r.repo, "kind": r.kind, "commit": commit})
        targets.append(str(pool_dir / r.folder))
    if not targets:
        raise SystemExit("no restored repository in those rows")
    findings = run_json(cmd, targets)
    root = pool_dir.resolve()
    counts = collections.Counter(f["code"] for f in findings)
    per_repo = collections.Counter(Path(f["filename"]).resolve().relative_to(root).parts[0] for f in findings)
    sample = draw(findings, seed, min_total=min_sample)
    sampled, sheet = [], [f"# Judging sheet: round {number} (pool rows {first}-{last}, seed {seed})\n"]
    n = 0
    for code, picked in sample.items():
        for f in picked:
            n += 1
            path = Path(f["filename"]).resolve()
            rel = path.relative_to(root)
            repo_folder, inner = rel.parts[0], str(Path(*rel.parts[1:]))
            fid = f"R{number}-{n:03d}"
            fix = f.get("fix")
            entry = {
                "id": fid,
                "rule": code,
                "repo": repo_folder.replace("__", "/", 1),
                "path": inner,
                "line": f["location"]["row"],
                "column": f["location"]["column"],
                "cell": f.get("cell"),
                "message": f["message"],
                "fix": fix.get("applicability") if fix else None,
            }
            sampled.append(entry)
            where = f"{entry['repo']}/{inner}" + (f" cell {entry['cell']}" if entry["cell"] else "")
            sheet.append(f"\n---\n\n## {fid} {code} {where}:{entry['line']}:{entry['column']}\n")
            sheet.append(f"message: {f['message']}\n")
            sheet.append(f"file on disk: {path}\n")
            sheet.append("```\n" + context(path, entry["line"], entry["cell"]) + "\n```\n")
            diff = fix_diff(path, f)
            if diff:
                sheet.append(f"offered fix ({entry['fix']}: {fix.get('message')}):\n```diff\n{diff}\n```\n")
            else:
                sheet.append("offered fix: none\n")
    meta = {
        "round": number,
        "first_sight": not reused,
        "guide": guide,
        "pool_rows": [first, last],
        "rows": rows,
        "seed": seed,
        "per_rule": PER_RULE,
        "min_sample": min_sample,
        "torchlint_commit": torchlint_commit(),
        "command": f"{cmd} check --output-format json --no-cache {' '.join(every_rule_flags(cmd))} --unsafe-fixes",
        "findings_per_rule": dict(sorted(counts.items())),
        "findings_per_repo": dict(sorted(per_repo.items())),
        "sampled": sampled,
        "findings": [[f["code"], *_where(f, root)] for f in sorted(findings, key=_key) if f["code"] != "TL000"],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "sheet.md").write_text("".join(sheet), encoding="utf-8")
    (out / "sample.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sampled), encoding="utf-8")
    if record:
        rd = ROUNDS / f"round-{number}"
        rd.mkdir(parents=True)
        (rd / "round.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        new = [
            LedgerEntry(r["order"], r["repo"], r.get("commit", "-"), number, not reused)
            for r in rows
            if r["order"] not in used
        ]
        write_ledger(list(ledger) + new)
    return meta


# -- files read in full for recall -------------------------------------------------

# A file worth reading for recall: it uses torch, names a device and has a data
# loop (not a test, not docs), and a reader can finish it.
_DEVICE = re.compile(r"\.cuda\(|\.to\(|device")
_DATA_LOOP = re.compile(r"^\s*for .* in .*(loader|Loader|batch|tqdm|epoch|range\(.*iter|enumerate\(.*data)", re.M)
_NOT_READ = re.compile(r"(^|/)(tests?|docs?)/|test_")
RECALL_MAX_LINES = 1500


def code_text(path: Path) -> str:
    """A .py file's text, or a notebook's code cells joined."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return raw
    try:
        cells = json.loads(raw).get("cells", [])
    except (ValueError, AttributeError):
        return ""
    out = []
    for c in cells:
        if c.get("cell_type") == "code":
            src = c.get("source", "")
            out.append("".join(src) if isinstance(src, list) else src)
    return "\n".join(out)


def recall_candidates(root: Path) -> List[str]:
    """The files of one restored repository worth reading in full for recall."""
    out = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".py", ".ipynb") or not path.is_file():
            continue
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or _NOT_READ.search(str(rel)):
            continue
        text = code_text(path)
        if "torch" in text and _DEVICE.search(text) and _DATA_LOOP.search(text) and text.count("\n") < RECALL_MAX_LINES:
            out.append(str(rel))
    return out


def draw_recall_files(
    groups: Sequence[Sequence[str]], seed: int, pool_dir: Path = DEFAULT_POOL, per_group: Sequence[int] = ()
) -> List[List[dict]]:
    """Per judging group (a list of repositories), the files its judge reads in
    full: one seeded shuffle per group, in group order, of every candidate;
    at most two per repository where a group has several; `per_group[i]`
    files (5 by default)."""
    rng = random.Random(seed)
    out = []
    for i, repos in enumerate(groups):
        want = per_group[i] if i < len(per_group) else 5
        candidates = [(repo, rel) for repo in repos for rel in recall_candidates(pool_dir / repo.replace("/", "__"))]
        rng.shuffle(candidates)
        picked: List[dict] = []
        per_repo: Dict[str, int] = collections.Counter()
        for repo, rel in candidates:
            if len(repos) > 1 and per_repo[repo] >= 2:
                continue
            picked.append({"repo": repo, "path": rel})
            per_repo[repo] += 1
            if len(picked) == want:
                break
        out.append(picked)
    return out


# -- the figures ------------------------------------------------------------------


@dataclass
class RuleTally:
    judged: int = 0
    tp: int = 0
    fp: int = 0
    unclear: int = 0
    fix_correct: int = 0
    fix_no_benefit: int = 0
    fix_wrong: int = 0

    def add(self, verdict: dict) -> None:
        self.judged += 1
        setattr(self, verdict["verdict"], getattr(self, verdict["verdict"]) + 1)
        fix = verdict.get("fix")
        if fix:
            attr = "fix_" + fix.replace("-", "_")
            setattr(self, attr, getattr(self, attr) + 1)

    @property
    def precision(self) -> Optional[float]:
        return self.tp / self.judged if self.judged else None


@dataclass(frozen=True)
class Round:
    number: int
    first_sight: bool
    meta: dict
    verdicts: Tuple[dict, ...]
    recall: dict

    def tallies(self) -> Dict[str, RuleTally]:
        out: Dict[str, RuleTally] = collections.defaultdict(RuleTally)
        for v in self.verdicts:
            out[v["rule"]].add(v)
        return dict(sorted(out.items()))

    def recall_counts(self) -> Tuple[int, int, int]:
        """(files read in full, instances, instances found)."""
        inst = self.recall.get("instances", [])
        return len(self.recall.get("files", [])), len(inst), sum(1 for i in inst if i.get("found"))


def load_rounds(root: Path = ROUNDS) -> List[Round]:
    """Every recorded round with its verdicts, in order; verdicts are checked
    against the round's sample (every sampled finding judged once, nothing else)."""
    out = []
    for rd in sorted(root.glob("round-*"), key=lambda p: int(p.name.split("-")[1])):
        meta = json.loads((rd / "round.json").read_text(encoding="utf-8"))
        vpath = rd / "verdicts.jsonl"
        verdicts = []
        if vpath.is_file():
            verdicts = [json.loads(x) for x in vpath.read_text(encoding="utf-8").splitlines() if x.strip()]
        check_verdicts(meta, verdicts, rd.name)
        rpath = rd / "recall.json"
        recall = json.loads(rpath.read_text(encoding="utf-8")) if rpath.is_file() else {}
        out.append(Round(meta["round"], meta["first_sight"], meta, tuple(verdicts), recall))
    return out


def check_verdicts(meta: dict, verdicts: Sequence[dict], where: str) -> None:
    if not verdicts:
        return
    sampled = {s["id"]: s for s in meta["sampled"]}
    ids = [v["id"] for v in verdicts]
    problems = []
    if sorted(ids) != sorted(sampled):
        missing = sorted(set(sampled) - set(ids))
        extra = sorted(set(ids) - set(sampled))
        problems.append(f"verdict ids differ from the sample (missing {missing}, extra {extra})")
    for v in verdicts:
        s = sampled.get(v["id"])
        if s and v.get("rule", s["rule"]) != s["rule"]:
            problems.append(f"{v['id']}: rule {v.get('rule')} but the sample says {s['rule']}")
        if v.get("verdict") not in VERDICTS:
            problems.append(f"{v['id']}: verdict {v.get('verdict')!r} is not one of {VERDICTS}")
        if v.get("fix") not in (None,) + FIX_VERDICTS:
            problems.append(f"{v['id']}: fix verdict {v.get('fix')!r} is not one of {FIX_VERDICTS} or null")
    if problems:
        raise SystemExit(f"{where}: " + "; ".join(problems))


def match_recall(meta: dict, recall: dict, pool_dir: Path = DEFAULT_POOL) -> dict:
    """`recall` with `found` set on each instance: a finding of the same rule in
    the same file (and cell) on a line of the instance's statement."""
    by_file: Dict[Tuple[str, str, Optional[int], str], List[int]] = collections.defaultdict(list)
    by_rule: Dict[Tuple[str, str, str], List[Tuple[Optional[int], int]]] = collections.defaultdict(list)
    for code, repo, path, line, cell in meta["findings"]:
        by_file[(repo, path, cell, code)].append(line)
        by_rule[(repo, path, code)].append((cell, line))
    out = []
    for inst in recall.get("instances", []):
        file = pool_dir / inst["repo"].replace("/", "__") / inst["path"]
        src = load_source(file, inst.get("cell"))
        text = src.text if inst.get("cell") is None else python_only(src.text)
        lo, hi = statement_span(text, inst["line"])
        lines = by_file.get((inst["repo"], inst["path"], inst.get("cell"), inst["rule"]), [])
        found = any(lo <= ln <= hi for ln in lines)
        if not found:
            # The rules report a cost inside a same-file helper where the loop calls it
            # (TL401's contract): a finding of the rule on a line that calls that helper counts.
            fn = enclosing_function(_parse(text), inst["line"])
            name = getattr(fn, "name", None)
            if name:
                for cell, line in by_rule.get((inst["repo"], inst["path"], inst["rule"]), []):
                    cell_lines = load_source(file, cell).text.splitlines()
                    if 0 < line <= len(cell_lines) and re.search(rf"\b{re.escape(name)}\(", cell_lines[line - 1]):
                        found = True
                        break
        out.append({**inst, "found": found})
    return {**recall, "instances": out}


def _with_rules(meta: dict, verdicts: Sequence[dict]) -> Tuple[dict, ...]:
    rules = {s["id"]: s["rule"] for s in meta["sampled"]}
    return tuple({**v, "rule": rules[v["id"]]} for v in verdicts)


def first_sight_table(rounds: Sequence[Round]) -> str:
    """Per round, per rule: judged, tp, fp, unclear, precision, fix verdicts; recall."""
    out = []
    for r in rounds:
        if not r.verdicts:
            out.append(f"round {r.number}: not judged yet")
            continue
        rows = r.meta["pool_rows"]
        label = "first sight" if r.first_sight else "NOT first sight"
        guide = r.meta.get("guide", "v1")
        out.append(f"round {r.number} ({label}; pool rows {rows[0]}-{rows[1]}, seed {r.meta['seed']}, guide {guide})")
        out.append(
            f"  {'rule':7} {'judged':>6} {'tp':>4} {'fp':>4} {'unclear':>7} {'prec':>5}"
            f"  {'fix ok':>6} {'no-benefit':>10} {'wrong':>5}"
        )
        total = RuleTally()
        for code, t in (
            Round(r.number, r.first_sight, r.meta, _with_rules(r.meta, r.verdicts), r.recall).tallies().items()
        ):
            out.append(_tally_line(code, t))
            for k in vars(total):
                setattr(total, k, getattr(total, k) + getattr(t, k))
        out.append(_tally_line("all", total))
        files, inst, found = r.recall_counts()
        if files:
            out.append(
                f"  recall: {found}/{inst} instances found in {files} files read in full"
                + (f" ({found / inst:.2f})" if inst else "")
            )
    return "\n".join(out)


def first_sight_markdown(rounds: Sequence[Round]) -> str:
    """The judged first-sight rounds as one Markdown table: per rule and round,
    true findings of judged (precision); then all rules, recall and fixes."""
    judged = [r for r in rounds if r.first_sight and r.verdicts]
    tallies = [Round(r.number, True, r.meta, _with_rules(r.meta, r.verdicts), r.recall).tallies() for r in judged]
    head = ["rule"] + [
        f"round {r.number} (rows {r.meta['pool_rows'][0]}-{r.meta['pool_rows'][1]}, guide {r.meta.get('guide', 'v1')})"
        for r in judged
    ]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cell(t: Optional[RuleTally]) -> str:
        if t is None or not t.judged:
            return "–"
        return f"{t.tp}/{t.judged} ({t.tp / t.judged:.2f})"

    for code in sorted({c for t in tallies for c in t}):
        out.append("| " + " | ".join([code] + [cell(t.get(code)) for t in tallies]) + " |")
    totals = []
    for t in tallies:
        total = RuleTally()
        for one in t.values():
            for k in vars(total):
                setattr(total, k, getattr(total, k) + getattr(one, k))
        totals.append(total)
    out.append("| " + " | ".join(["**all**"] + [f"**{cell(t)}**" for t in totals]) + " |")
    recall = []
    for r in judged:
        files, inst, found = r.recall_counts()
        recall.append(f"{found}/{inst} ({found / inst:.2f}) in {files} files" if inst else "–")
    out.append("| " + " | ".join(["recall"] + recall) + " |")
    fixes = [f"{t.fix_correct} correct, {t.fix_no_benefit} no-benefit, {t.fix_wrong} wrong" for t in totals]
    out.append("| " + " | ".join(["offered fixes"] + fixes) + " |")
    return "\n".join(out)


def _tally_line(code: str, t: RuleTally) -> str:
    p = f"{t.precision:.2f}" if t.precision is not None else "  -"
    return (
        f"  {code:7} {t.judged:6} {t.tp:4} {t.fp:4} {t.unclear:7} {p:>5}"
        f"  {t.fix_correct:6} {t.fix_no_benefit:10} {t.fix_wrong:5}"
    )


# -- rule status ------------------------------------------------------------------


def rule_statuses(rounds: Sequence[Round], codes: Iterable[str]) -> Dict[str, "RuleStatus"]:
    """Each rule's status from its last two judged first-sight rounds (pooled):
    see torchlint/rules/stability.py for the policy."""
    from torchlint.rules.stability import ALWAYS_ON, ALWAYS_REPORTED, GUIDE, ROUNDS_CONSIDERED, decide

    judged_rounds = [r for r in rounds if r.first_sight and r.verdicts and r.meta.get("guide", "v1") == GUIDE]
    out = {}
    for code in codes:
        if code in ALWAYS_REPORTED:
            out[code] = ALWAYS_ON
            continue
        mine = []
        for r in judged_rounds:
            t = Round(r.number, True, r.meta, _with_rules(r.meta, r.verdicts), r.recall).tallies().get(code)
            mine.append((r.number, t))
        with_findings = [(n, t) for n, t in mine if t is not None][-ROUNDS_CONSIDERED:]
        if with_findings:
            used = tuple(n for n, _ in with_findings)
            judged = sum(t.judged for _, t in with_findings)
            tp = sum(t.tp for _, t in with_findings)
            wrong = sum(t.fix_wrong for _, t in with_findings)
        else:  # judged rounds drew none of its findings
            used, judged, tp, wrong = tuple(n for n, _ in mine[-ROUNDS_CONSIDERED:]), 0, 0, 0
        out[code] = decide(judged, tp, wrong, used)
    return out
