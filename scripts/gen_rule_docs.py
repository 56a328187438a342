#!/usr/bin/env python
"""Write docs/rules/<name>.md for every rule and docs/rules/README.md (the index).

    python scripts/gen_rule_docs.py          # (re)write the pages
    python scripts/gen_rule_docs.py --check  # exit 1 when a page is stale, missing or extra
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchlint.ruledocs import DOCS_DIR, doc_problems, documented_rules, generated_docs  # noqa: E402


def stale_files(docs: Path) -> list:
    """Relative names of pages that differ from what the rules render (or should not exist)."""
    want = generated_docs()
    stale = []
    for name, text in sorted(want.items()):
        path = docs / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(name)
    if docs.is_dir():
        for path in sorted(docs.glob("*.md")):
            if path.name not in want:
                stale.append(path.name)
    return stale


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="report stale pages and exit 1 instead of writing")
    parser.add_argument("--docs", default=str(ROOT / DOCS_DIR), help="output folder (default: docs/rules)")
    args = parser.parse_args(argv)
    docs = Path(args.docs)

    bad = [(r.CODE, p) for r in documented_rules() for p in doc_problems(r)]
    for code, problem in bad:
        print(f"{code}: docstring: {problem}", file=sys.stderr)

    if args.check:
        stale = stale_files(docs)
        for name in stale:
            print(f"stale: {docs / name}", file=sys.stderr)
        if stale:
            print("run `python scripts/gen_rule_docs.py` to regenerate the rule docs", file=sys.stderr)
        return 1 if stale or bad else 0

    docs.mkdir(parents=True, exist_ok=True)
    want = generated_docs()
    for path in docs.glob("*.md"):
        if path.name not in want:
            path.unlink()
            print(f"removed {path}")
    for name, text in sorted(want.items()):
        path = docs / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
