"""Where lint time goes, per stage and per rule, over a folder of Python files.

usage: python bench/placement_cost.py [ROOT [SUBDIR...]]
(default: the installed torch package's nn/, optim/ and utils/data/).
Prints total lines/s and the seconds spent parsing, collecting facts, in each
rule's check, in positions (one code generation pass) and in building fixes.
"""

import collections
import glob
import importlib.util
import os
import sys
import time

import torchlint.analysis as analysis
import torchlint.engine.pipeline as pipeline
from torchlint.api import lint_source
from torchlint.rules import all_rules

cost: "collections.Counter[str]" = collections.Counter()


def timed(module, name, key):
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            cost[key] += time.perf_counter() - start

    setattr(module, name, wrapper)


def main() -> None:
    for rule in all_rules():
        timed(rule, "check", rule.CODE)
    timed(analysis, "collect_facts", "facts")
    timed(pipeline, "parse", "parse")
    timed(pipeline, "render", "positions")
    timed(pipeline, "fix_edits", "fixes")
    if len(sys.argv) > 1:
        base = sys.argv[1]
    else:
        base = os.path.dirname(importlib.util.find_spec("torch").origin)
    files = []
    for sub in sys.argv[2:] or ("nn", "optim", "utils/data"):
        files += sorted(glob.glob(os.path.join(base, sub, "**/*.py"), recursive=True))
    sources = [open(p, encoding="utf-8").read() for p in files]
    lines = sum(s.count("\n") for s in sources)
    start = time.perf_counter()
    found = sum(len(lint_source(s, "x.py")) for s in sources)
    total = time.perf_counter() - start
    print(f"files {len(files)} lines {lines} findings {found} total {total:.2f}s = {lines / total:.0f} lines/s")
    for key, seconds in cost.most_common():
        print(f"  {key:16} {seconds:6.2f}s")


if __name__ == "__main__":
    main()
