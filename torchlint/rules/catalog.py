"""Every rule's code, name, severity and status, readable without importing the rules.

Generated from the rule classes and the judged first-sight rounds (docs/accuracy/rounds)
by `python scripts/gen_rule_docs.py`; do not edit. tests/test_rule_docs.py checks that it is current.
"""

from torchlint.rules.stability import RuleStatus, Stability

CATALOG = {
    "TL000": "syntax-error",
    "TL001": "io-error",
    "TL100": "no-device",
    "TL101": "model-not-moved",
    "TL102": "input-not-moved",
    "TL103": "batch-not-moved",
    "TL104": "create-then-move",
    "TL105": "discarded-move",
    "TL106": "move-in-loop",
    "TL201": "missing-no-grad",
    "TL202": "graph-retained",
    "TL301": "batch-size-one",
    "TL302": "loader-no-workers",
    "TL303": "loader-no-pin-memory",
    "TL304": "loader-workers-restarted",
    "TL401": "sync-in-loop",
    "TL402": "tensor-python-loop",
    "TL403": "per-step-device-call",
    "TL404": "compile-in-loop",
    "TL501": "legacy-profiler",
    "TL601": "data-parallel",
}

SEVERITIES = {
    "TL000": "error",
    "TL001": "error",
    "TL100": "warning",
    "TL101": "warning",
    "TL102": "warning",
    "TL103": "warning",
    "TL104": "warning",
    "TL105": "warning",
    "TL106": "warning",
    "TL201": "warning",
    "TL202": "warning",
    "TL301": "warning",
    "TL302": "warning",
    "TL303": "warning",
    "TL304": "warning",
    "TL401": "warning",
    "TL402": "warning",
    "TL403": "warning",
    "TL404": "warning",
    "TL501": "warning",
    "TL601": "warning",
}

STATUS = {
    "TL000": RuleStatus(Stability.STABLE, judged=0, tp=0, fixes_wrong=0, rounds=()),
    "TL001": RuleStatus(Stability.STABLE, judged=0, tp=0, fixes_wrong=0, rounds=()),
    "TL100": RuleStatus(Stability.PREVIEW, judged=1, tp=1, fixes_wrong=0, rounds=(10,)),
    "TL101": RuleStatus(Stability.PREVIEW, judged=1, tp=0, fixes_wrong=0, rounds=(11,)),
    "TL102": RuleStatus(Stability.PREVIEW, judged=0, tp=0, fixes_wrong=0, rounds=(11, 12)),
    "TL103": RuleStatus(Stability.PREVIEW, judged=2, tp=0, fixes_wrong=0, rounds=(8,)),
    "TL104": RuleStatus(Stability.PREVIEW, judged=15, tp=11, fixes_wrong=0, rounds=(11, 12)),
    "TL105": RuleStatus(Stability.PREVIEW, judged=1, tp=0, fixes_wrong=0, rounds=(7,)),
    "TL106": RuleStatus(Stability.PREVIEW, judged=0, tp=0, fixes_wrong=0, rounds=(11, 12)),
    "TL201": RuleStatus(Stability.PREVIEW, judged=7, tp=0, fixes_wrong=0, rounds=(11, 12)),
    "TL202": RuleStatus(Stability.PREVIEW, judged=2, tp=0, fixes_wrong=0, rounds=(7,)),
    "TL301": RuleStatus(Stability.PREVIEW, judged=8, tp=1, fixes_wrong=0, rounds=(10, 11)),
    "TL302": RuleStatus(Stability.PREVIEW, judged=20, tp=15, fixes_wrong=0, rounds=(10, 11)),
    "TL303": RuleStatus(Stability.PREVIEW, judged=13, tp=1, fixes_wrong=0, rounds=(11, 12)),
    "TL304": RuleStatus(Stability.STABLE, judged=11, tp=11, fixes_wrong=0, rounds=(10, 11)),
    "TL401": RuleStatus(Stability.PREVIEW, judged=16, tp=14, fixes_wrong=0, rounds=(11, 12)),
    "TL402": RuleStatus(Stability.PREVIEW, judged=7, tp=0, fixes_wrong=0, rounds=(10, 11)),
    "TL403": RuleStatus(Stability.PREVIEW, judged=5, tp=3, fixes_wrong=0, rounds=(9, 12)),
    "TL404": RuleStatus(Stability.PREVIEW, judged=0, tp=0, fixes_wrong=0, rounds=(11, 12)),
    "TL501": RuleStatus(Stability.PREVIEW, judged=0, tp=0, fixes_wrong=0, rounds=(11, 12)),
    "TL601": RuleStatus(Stability.PREVIEW, judged=12, tp=5, fixes_wrong=0, rounds=(10, 11)),
}
