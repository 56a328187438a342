"""Every rule's code, name and severity, readable without importing the rules.

Generated from the rule classes by `python scripts/gen_rule_docs.py`; do not edit.
tests/test_rule_docs.py checks that it is current.
"""

CATALOG = {
    "TL000": "syntax-error",
    "TL001": "io-error",
    "TL100": "no-device",
    "TL101": "model-not-moved",
    "TL102": "input-not-moved",
    "TL103": "batch-not-moved",
    "TL104": "create-then-move",
    "TL105": "discarded-move",
    "TL201": "missing-no-grad",
    "TL301": "batch-size-one",
    "TL302": "loader-no-workers",
    "TL303": "loader-no-pin-memory",
    "TL401": "sync-in-loop",
    "TL402": "tensor-python-loop",
    "TL501": "legacy-profiler",
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
    "TL201": "warning",
    "TL301": "warning",
    "TL302": "warning",
    "TL303": "warning",
    "TL401": "warning",
    "TL402": "warning",
    "TL501": "warning",
}
