"""The rule registry: every `Rule` subclass in a module under `torchlint.rules`.

Rules are discovered by importing each submodule once; adding a rule is adding
a module, nothing else to register.
"""
from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Dict, List, Type

from torchlint.rules.base import Invalid, Rule, RuleContext

__all__ = ["Invalid", "Rule", "RuleContext", "all_rules", "rule_by_code", "TL000"]

# TL000 is produced by the engine itself, not by a Rule class.
TL000 = ("TL000", "syntax-error")


def _walk() -> List[Type[Rule]]:
    found: Dict[str, Type[Rule]] = {}
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


def rule_by_code(code: str) -> Type[Rule]:
    for rule in all_rules():
        if rule.CODE == code.upper():
            return rule
    raise KeyError(code)


def all_codes() -> List[str]:
    return [TL000[0]] + [r.CODE for r in all_rules()]


def name_of(code: str) -> str:
    if code == TL000[0]:
        return TL000[1]
    return rule_by_code(code).NAME
