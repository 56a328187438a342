"""The rule registry: every `Rule` subclass in a module under `torchlint.rules`.

Rules are discovered by importing each submodule once; adding a rule is adding
a module (and its line in CATALOG). CATALOG lists every code and name without
importing the rules (and LibCST): configuration checks and reporters use it,
so a run answered from the cache never imports LibCST. A test checks that
CATALOG and the discovered rules agree.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Dict, List

__all__ = ["CATALOG", "all_codes", "all_rules", "name_of", "rule_by_code", "rule_url", "TL000"]

# TL000 is produced by the engine itself, not by a Rule class.
TL000 = ("TL000", "syntax-error")

# code -> name, for every code (RULES.md; codes never change).
CATALOG = {
    "TL000": "syntax-error",
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

DOCS_BASE_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/"


def _walk() -> List[type]:
    from torchlint.rules.base import Rule

    found: Dict[str, type] = {}
    for info in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        if info.name.endswith(".base"):
            continue
        mod = importlib.import_module(info.name)
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule and getattr(obj, "CODE", None):
                if obj.__module__ == mod.__name__:
                    if obj.CODE in found and found[obj.CODE] is not obj:
                        raise RuntimeError(f"two rules claim {obj.CODE}")
                    found[obj.CODE] = obj
    return [found[c] for c in sorted(found)]


@lru_cache(maxsize=None)
def all_rules() -> tuple:
    """Every rule class, sorted by code."""
    return tuple(_walk())


def rule_by_code(code: str) -> type:
    for rule in all_rules():
        if rule.CODE == code.upper():
            return rule
    raise KeyError(code)


def all_codes() -> List[str]:
    return sorted(CATALOG)


def name_of(code: str) -> str:
    """The rule's name; KeyError for an unknown code."""
    return CATALOG[code.upper()]


def rule_url(code: str) -> str:
    """Where a rule's documentation lives (docs/rules/<name>.md); KeyError if unknown."""
    return f"{DOCS_BASE_URL}{name_of(code)}.md"
