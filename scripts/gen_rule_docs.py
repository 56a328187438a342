#!/usr/bin/env python
"""Write what is generated from the rule classes: docs/rules/<name>.md for every
rule, docs/rules/README.md (the index) and torchlint/rules/catalog.py.

    python scripts/gen_rule_docs.py          # (re)write them
    python scripts/gen_rule_docs.py --check  # exit 1 when one is stale, missing or extra
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Dict, List

from torchlint.doors.rule_docs import (
    CATALOG_PATH,
    DOCS_DIR,
    README_PATH,
    doc_problems,
    documented_rules,
    generated_docs,
    readme_with_statuses,
    render_catalog,
)
from torchlint.rules.stability import RuleStatus

ROOT = Path(__file__).resolve().parents[1]


def measured_statuses() -> Dict[str, RuleStatus]:
    """Every rule's status as the judged first-sight rounds decide it."""
    if str(ROOT) not in sys.path:  # run as `python scripts/gen_rule_docs.py`
        sys.path.insert(0, str(ROOT))
    from bench import rounds

    return rounds.rule_statuses(rounds.load_rounds(), [r.CODE for r in documented_rules()])


def wanted(docs: Path, catalog: Path) -> Dict[Path, str]:
    """Every generated file (its path) and the text it should hold."""
    statuses = measured_statuses()
    files = {docs / name: text for name, text in generated_docs(statuses).items()}
    files[catalog] = render_catalog(statuses)
    readme = ROOT / README_PATH
    files[readme] = readme_with_statuses(readme.read_text(encoding="utf-8"), statuses)
    return files


def stale_files(docs: Path, catalog: Path) -> List[Path]:
    """Generated files that differ from what the rules render, or should not exist."""
    want = wanted(docs, catalog)
    stale = [p for p, text in sorted(want.items()) if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if docs.is_dir():
        stale += [p for p in sorted(docs.glob("*.md")) if p not in want]
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale files and exit 1 instead of writing")
    parser.add_argument("--docs", default=str(ROOT / DOCS_DIR), help="output folder (default: docs/rules)")
    parser.add_argument("--catalog", default=str(ROOT / CATALOG_PATH), help=f"catalog file (default: {CATALOG_PATH})")
    args = parser.parse_args(argv)
    docs, catalog = Path(args.docs), Path(args.catalog)

    bad = [(r.CODE, p) for r in documented_rules() for p in doc_problems(r)]
    for code, problem in bad:
        print(f"{code}: docstring: {problem}", file=sys.stderr)

    if args.check:
        stale = stale_files(docs, catalog)
        for path in stale:
            print(f"stale: {path}", file=sys.stderr)
        if stale:
            print("run `python scripts/gen_rule_docs.py` to regenerate them", file=sys.stderr)
        return 1 if stale or bad else 0

    docs.mkdir(parents=True, exist_ok=True)
    want = wanted(docs, catalog)
    for path in sorted(docs.glob("*.md")):
        if path not in want:
            path.unlink()
            print(f"removed {path}")
    for path, text in sorted(want.items()):
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
