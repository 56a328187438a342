"""Accuracy on real code nobody here wrote: the yardstick for torchlint's precision.

Three subcommands, all reproducible:

  score   precision/recall per rule family (and per rule) against the labelled
          corpus (`../shared/corpus/labels.jsonl`, files restored at `../corpus`
          by `../shared/corpus/restore.sh`).
  sample  run torchlint over the *whole* restored corpus and draw a seeded
          random sample of findings per rule (default 20), each with its code
          context, for a person to judge. Identical files (the same code in
          several checkouts) count once. The sample is written outside the
          repository (it holds third-party code); only verdicts are committed.
  judged  precision per rule from judged JSONL files (`docs/accuracy/*.jsonl`:
          one row per finding with path, line, rule, verdict tp/fp/unclear, reason).

    python bench/accuracy.py score
    python bench/accuracy.py sample --seed 14 --out ../accuracy-work/before.jsonl
    python bench/accuracy.py judged docs/accuracy/sample-before.jsonl

First sight (bench/rounds.py): rounds on pool repositories never tuned on.

  round       run torchlint (every rule, preview included) over pool rows
              FIRST..LAST restored at ../pool, draw a seeded sample (at most
              10 per rule) and write a judging sheet outside the repository;
              record the round and its rows in docs/accuracy/rounds/.
  first-sight per round and rule: judged, tp, fp, unclear, precision, fix
              verdicts, and recall over the files read in full.

    python bench/accuracy.py round 1 --rows 1-12 --seed 101 --out ../accuracy-work/round-1
    python bench/accuracy.py first-sight

torchlint runs as a subprocess (`python -m torchlint`, or `--torchlint CMD`)
so the figures are those of the command users run.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import random
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

try:
    from bench import rounds
    from bench.spans import statement_span
except ImportError:  # run as a script: bench/ is on sys.path
    import rounds  # type: ignore[no-redef]
    from spans import statement_span  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
DEFAULT_CORPUS = PROJECT.parent / "corpus"
DEFAULT_LABELS = PROJECT.parent / "shared" / "corpus" / "labels.jsonl"

FAMILY = {
    "TL100": "TL-MODEL",
    "TL101": "TL-MODEL",
    "TL102": "TL-TENSOR",
    "TL104": "TL-TENSOR",
    "TL105": "TL-TENSOR",
    "TL103": "TL-BATCH",
    "TL201": "TL-NOGRAD",
    "TL301": "TL-BATCH1",
    "TL302": "TL-LOADER",
    "TL303": "TL-LOADER",
    "TL401": "TL-SYNC",
    "TL402": "TL-PYLOOP",
}


def run_torchlint(cmd: str, targets: List[str]) -> List[dict]:
    """torchlint's JSON findings for `targets` (no cache, exit code ignored)."""
    argv = shlex.split(cmd) + ["check", "--output-format", "json", "--exit-zero", "--no-cache"]
    argv += rounds.every_rule_flags(cmd) + list(targets)  # every rule, preview included
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, cwd=PROJECT)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"torchlint printed no JSON (exit {proc.returncode})") from None


# -- score -------------------------------------------------------------------


def score(corpus: Path, labels_path: Path, cmd: str, verbose: bool) -> dict:
    labels = [json.loads(line) for line in labels_path.read_text().splitlines() if line.strip()]
    files = sorted({(lab["checkout"], lab["path"]) for lab in labels})
    missing = [f for f in files if not (corpus / f[0] / f[1]).exists()]
    if missing:
        raise SystemExit(f"corpus incomplete: {len(missing)} of {len(files)} files missing under {corpus}")
    # Each checkout whole (a project fact, such as a function no file calls, needs every
    # file) and the labelled files by name (a folder a .gitignore names is otherwise skipped).
    checkouts = sorted({str(corpus / c) for c, _ in files})
    found = run_torchlint(cmd, checkouts + [str(corpus / c / p) for c, p in files])
    root = corpus.resolve()
    by_file: Dict[Tuple[str, str], List[Tuple[str, int]]] = collections.defaultdict(list)
    for f in found:
        rel = Path(f["filename"]).resolve().relative_to(root)
        by_file[(rel.parts[0], str(Path(*rel.parts[1:])))].append((f["code"], f["location"]["row"]))
    fam = collections.defaultdict(lambda: [0, 0, 0])  # tp fp fn
    rule = collections.defaultdict(lambda: [0, 0])  # tp fp
    used = set()
    clean = {(lab["checkout"], lab["path"]) for lab in labels if lab["verdict"] == "clean"}
    lines: List[str] = []
    sources: Dict[Tuple[str, str], str] = {}
    for lab in labels:
        if lab["verdict"] == "clean":
            continue
        key = (lab["checkout"], lab["path"])
        if key not in sources:
            sources[key] = (corpus / key[0] / key[1]).read_text(encoding="utf-8", errors="replace")
        lo, hi = statement_span(sources[key], lab["line"])
        hits = [h for h in by_file.get(key, []) if FAMILY.get(h[0]) == lab["rule"] and lo <= h[1] <= hi]
        used.update((key, h) for h in hits)
        where = f"{key[0]}/{key[1]}:{lab['line']}"
        if lab["verdict"] == "tp":
            fam[lab["rule"]][0 if hits else 2] += 1
            for code in sorted({h[0] for h in hits}):
                rule[code][0] += 1
            if not hits:
                lines.append(f"  missed {lab['rule']:9} {where}  {lab['why'][:90]}")
        elif hits:
            fam[lab["rule"]][1] += 1
            for code in sorted({h[0] for h in hits}):
                rule[code][1] += 1
            lines.append(f"  false+ {hits[0][0]:9} {where}  {lab['why'][:90]}")
    unknown = 0
    for key, hs in by_file.items():
        for h in hs:
            if (key, h) in used or h[0] == "TL000":
                continue
            if key in clean:
                fam[FAMILY.get(h[0], h[0])][1] += 1
                rule[h[0]][1] += 1
                lines.append(f"  false+ {h[0]:9} {key[0]}/{key[1]}:{h[1]}  (clean file)")
            else:
                unknown += 1
    if verbose:
        print("\n".join(sorted(lines)))
    return {
        "family": {k: dict(zip(("tp", "fp", "fn"), v)) for k, v in sorted(fam.items())},
        "rule": {k: dict(zip(("tp", "fp"), v)) for k, v in sorted(rule.items())},
        "unknown": unknown,
    }


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "  - "


def print_score(result: dict) -> None:
    print(f"{'family':10} {'tp':>4} {'fp':>4} {'fn':>4} {'prec':>5} {'recall':>6}")
    total = [0, 0, 0]
    for fam, v in result["family"].items():
        total = [total[0] + v["tp"], total[1] + v["fp"], total[2] + v["fn"]]
        print(
            f"{fam:10} {v['tp']:4} {v['fp']:4} {v['fn']:4} {_ratio(v['tp'], v['tp'] + v['fp']):>5} "
            f"{_ratio(v['tp'], v['tp'] + v['fn']):>6}"
        )
    print(
        f"{'all':10} {total[0]:4} {total[1]:4} {total[2]:4} {_ratio(total[0], total[0] + total[1]):>5} "
        f"{_ratio(total[0], total[0] + total[2]):>6}   (unknown {result['unknown']})"
    )
    print(f"\n{'rule':10} {'tp':>4} {'fp':>4}")
    for code, v in result["rule"].items():
        print(f"{code:10} {v['tp']:4} {v['fp']:4}")


# -- sample ------------------------------------------------------------------


def corpus_files(corpus: Path) -> List[Path]:
    """Every .py/.ipynb file of the restored corpus, identical contents once
    (the first path in sorted order keeps them)."""
    seen = set()
    out = []
    for path in sorted(p for p in corpus.rglob("*") if p.suffix in (".py", ".ipynb") and p.is_file()):
        digest = hashlib.sha1(path.read_bytes()).hexdigest()
        if digest not in seen:
            seen.add(digest)
            out.append(path)
    return out


def _context(path: Path, row: int, cell: Optional[int], radius: int = 25) -> str:
    if cell is not None:
        try:
            nb = json.loads(path.read_text(encoding="utf-8"))
            src = nb["cells"][cell - 1]["source"]  # `cell` counts every cell, as Ruff does
            text = "".join(src) if isinstance(src, list) else src
        except (ValueError, IndexError, KeyError):
            return ""
    else:
        text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    lo, hi = max(1, row - radius), min(len(lines), row + radius)
    return "\n".join(f"{'>' if i == row else ' '}{i:5} {lines[i - 1]}" for i in range(lo, hi + 1))


def sample(corpus: Path, cmd: str, seed: int, per_rule: int, out: Path) -> Dict[str, int]:
    files = corpus_files(corpus)
    found = run_torchlint(cmd, [str(p) for p in files])
    root = corpus.resolve()
    by_rule: Dict[str, List[dict]] = collections.defaultdict(list)
    for f in found:
        if f["code"] == "TL000":
            continue
        by_rule[f["code"]].append(f)
    rng = random.Random(seed)
    rows = []
    counts = {}
    for code in sorted(by_rule):
        pool = sorted(
            by_rule[code],
            key=lambda f: (f["filename"], f.get("cell") or 0, f["location"]["row"], f["location"]["column"]),
        )
        counts[code] = len(pool)
        picked = pool if len(pool) <= per_rule else rng.sample(pool, per_rule)
        picked.sort(key=lambda f: (f["filename"], f.get("cell") or 0, f["location"]["row"]))
        for f in picked:
            path = Path(f["filename"]).resolve()
            fix = f.get("fix")
            rows.append(
                {
                    "rule": code,
                    "path": str(path.relative_to(root)),
                    "line": f["location"]["row"],
                    "column": f["location"]["column"],
                    "cell": f.get("cell"),
                    "message": f["message"],
                    "fix": (fix or {}).get("applicability") if fix else None,
                    "context": _context(path, f["location"]["row"], f.get("cell")),
                }
            )
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    return counts


# -- judged ------------------------------------------------------------------


def judged(paths: Iterable[Path]) -> Dict[str, Dict[str, int]]:
    table: Dict[str, Dict[str, int]] = collections.defaultdict(lambda: {"tp": 0, "fp": 0, "unclear": 0})
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                table[row["rule"]][row["verdict"]] += 1
    return dict(sorted(table.items()))


def print_judged(table: Dict[str, Dict[str, int]]) -> None:
    print(f"{'rule':7} {'judged':>6} {'tp':>4} {'fp':>4} {'unclear':>7} {'precision':>9}")
    tot = {"tp": 0, "fp": 0, "unclear": 0}
    for code, v in table.items():
        n = sum(v.values())
        for k in tot:
            tot[k] += v[k]
        print(f"{code:7} {n:6} {v['tp']:4} {v['fp']:4} {v['unclear']:7} {_ratio(v['tp'], n):>9}")
    n = sum(tot.values())
    print(f"{'all':7} {n:6} {tot['tp']:4} {tot['fp']:4} {tot['unclear']:7} {_ratio(tot['tp'], n):>9}")


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--torchlint",
        default=f"{shlex.quote(sys.executable)} -m torchlint",
        help="command that runs torchlint (default: this Python's -m torchlint)",
    )
    sub = ap.add_subparsers(dest="command", required=True)
    sc = sub.add_parser("score", help="precision/recall against the labels")
    sc.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    sc.add_argument("--labels", type=Path, default=DEFAULT_LABELS)
    sc.add_argument("--verbose", action="store_true", help="list every miss and false positive")
    sc.add_argument("--json", type=Path, help="also write the table as JSON")
    sa = sub.add_parser("sample", help="a seeded random sample of findings per rule over the whole corpus")
    sa.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    sa.add_argument("--seed", type=int, default=14)
    sa.add_argument("--per-rule", type=int, default=20)
    sa.add_argument("--out", type=Path, required=True, help="JSONL with code context (keep it outside the repo)")
    ju = sub.add_parser("judged", help="precision per rule from judged JSONL files")
    ju.add_argument("files", type=Path, nargs="+")
    ro = sub.add_parser("round", help="a first-sight round on pool rows: sample and judging sheet")
    ro.add_argument("number", type=int, help="the round's number (docs/accuracy/rounds/round-N)")
    ro.add_argument("--rows", required=True, help="pool rows FIRST-LAST (see ../shared/corpus/pool.tsv)")
    ro.add_argument("--seed", type=int, required=True)
    ro.add_argument("--out", type=Path, required=True, help="folder for the sheet (outside the repository)")
    ro.add_argument("--pool", type=Path, default=rounds.DEFAULT_POOL, help="restored pool (default ../pool)")
    ro.add_argument("--pool-tsv", type=Path, default=rounds.DEFAULT_POOL_TSV)
    ro.add_argument("--seen", action="store_true", help="run on rows already used (recorded as not first sight)")
    ro.add_argument("--no-record", action="store_true", help="write the sheet only (nothing under docs/)")
    ro.add_argument("--min-sample", type=int, default=0, help="top the sample up to this many findings")
    ro.add_argument("--guide", default=rounds.GUIDE, help="the judging guide the round is judged with")
    rf = sub.add_parser("recall-files", help="draw the files each judging group reads in full for recall")
    rf.add_argument("--seed", type=int, required=True)
    rf.add_argument("--group", action="append", required=True, help="owner/name,owner/name,... (one per judge)")
    rf.add_argument("--per-group", type=int, action="append", default=[], help="files for each group (default 5)")
    rf.add_argument("--pool", type=Path, default=rounds.DEFAULT_POOL)
    fs = sub.add_parser("first-sight", help="per round and rule: judged, tp, fp, unclear, precision, fixes, recall")
    fs.add_argument(
        "--markdown", action="store_true", help="one Markdown table of every judged round (docs/accuracy.md)"
    )
    rc = sub.add_parser("recall", help="mark a round's recall instances found or missed from its findings")
    rc.add_argument("number", type=int)
    rc.add_argument("--pool", type=Path, default=rounds.DEFAULT_POOL)
    args = ap.parse_args(argv)
    if args.command == "round":
        first, _, last = args.rows.partition("-")
        meta = rounds.run_round(
            args.number,
            int(first),
            int(last or first),
            args.seed,
            args.out,
            args.torchlint,
            args.pool_tsv,
            args.pool,
            seen=args.seen,
            record=not args.no_record,
            min_sample=args.min_sample,
            guide=args.guide,
        )
        for row in meta["rows"]:
            print(f"  row {row['order']:3} {row['repo']:50} {row.get('commit') or row['skipped']}")
        print("findings per rule:", ", ".join(f"{k} {v}" for k, v in meta["findings_per_rule"].items()))
        print(f"sampled {len(meta['sampled'])} findings; sheet: {args.out / 'sheet.md'}")
        return 0
    if args.command == "recall":
        rd = rounds.ROUNDS / f"round-{args.number}"
        meta = json.loads((rd / "round.json").read_text(encoding="utf-8"))
        recall = rounds.match_recall(meta, json.loads((rd / "recall.json").read_text(encoding="utf-8")), args.pool)
        (rd / "recall.json").write_text(json.dumps(recall, indent=1) + "\n", encoding="utf-8")
        inst = recall["instances"]
        print(f"{sum(i['found'] for i in inst)}/{len(inst)} found in {len(recall.get('files', []))} files")
        for i in inst:
            print(
                f"  {'found ' if i['found'] else 'MISSED'} {i['rule']} {i['repo']}/{i['path']}:{i['line']}  {i.get('why', '')[:80]}"
            )
        return 0
    if args.command == "recall-files":
        groups = [g.split(",") for g in args.group]
        drawn = rounds.draw_recall_files(groups, args.seed, args.pool, args.per_group)
        print(json.dumps({chr(ord("A") + i): files for i, files in enumerate(drawn)}, indent=1))
        return 0
    if args.command == "first-sight":
        loaded = rounds.load_rounds()
        print(rounds.first_sight_markdown(loaded) if args.markdown else rounds.first_sight_table(loaded))
        return 0
    if args.command == "score":
        result = score(args.corpus, args.labels, args.torchlint, args.verbose)
        print_score(result)
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n")
    elif args.command == "sample":
        counts = sample(args.corpus, args.torchlint, args.seed, args.per_rule, args.out)
        print("findings per rule over the whole corpus (identical files once):")
        for code, n in counts.items():
            print(f"  {code}: {n} (sampled {min(n, args.per_rule)})")
        print(f"sample written to {args.out}")
    else:
        print_judged(judged(args.files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
