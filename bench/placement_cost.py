"""Where lint time goes, per stage and per rule, over a folder of Python files.

usage: python bench/placement_cost.py [ROOT [SUBDIR...]]
(default: the installed torch package's nn/, optim/ and utils/data/).
Prints total lines/s and the seconds spent parsing, collecting facts, in each
rule's check, and in positions+fix building.
"""
import glob, os, sys, time, collections
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from torchlint.api import lint_source
from torchlint.rules import all_rules
import torchlint.engine as E
cost = collections.Counter()
for r in all_rules():
    orig = r.check
    def wrap(self, ctx, _o=orig, _c=r.CODE):
        t = time.perf_counter(); _o(self, ctx); cost[_c] += time.perf_counter() - t
    r.check = wrap
of = E.collect_facts
def cf(m):
    t = time.perf_counter(); r = of(m); cost["facts"] += time.perf_counter() - t; return r
E.collect_facts = cf
op = E.parse
def pp(s):
    t = time.perf_counter(); r = op(s); cost["parse"] += time.perf_counter() - t; return r
E.parse = pp
otf = E._to_findings
def tf(*a):
    t = time.perf_counter(); r = otf(*a); cost["positions+fixes"] += time.perf_counter() - t; return r
E._to_findings = tf
if len(sys.argv) > 1:
    base = sys.argv[1]
else:
    import importlib.util
    base = os.path.dirname(importlib.util.find_spec("torch").origin)
files = []
for sub in (sys.argv[2:] or ("nn", "optim", "utils/data")):
    files += sorted(glob.glob(os.path.join(base, sub, "**/*.py"), recursive=True))
srcs = [open(p, encoding="utf-8").read() for p in files]
lines = sum(s.count("\n") for s in srcs)
t = time.perf_counter()
n = 0
for s in srcs: n += len(lint_source(s, "x.py"))
total = time.perf_counter() - t
print(f"files {len(files)} lines {lines} findings {n} total {total:.2f}s = {lines/total:.0f} lines/s")
for k, v in cost.most_common(): print(f"  {k:16} {v:6.2f}s")
