"""The rule registry: every `Rule` subclass in a module under `torchlint.rules`.

Rules are discovered by importing each submodule once; adding a rule is adding
a module. What configuration, reporters and the cache need to know about the
rules (codes, names, severities) comes from `torchlint/rules/catalog.py`, a
file generated from the rule classes (`python scripts/gen_rule_docs.py`;
tests/test_rule_docs.py checks it is current), so a run answered from the
cache never imports the rules (and LibCST).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Tuple, Type

from torchlint.rules.catalog import CATALOG, SEVERITIES, STATUS
from torchlint.rules.stability import ALWAYS_ON, ALWAYS_REPORTED, RuleStatus, Stability

if TYPE_CHECKING:  # rules.base imports LibCST: not at run time here
    from torchlint.rules.base import Rule

__all__ = [
    "CATALOG",
    "DOCS_BASE_URL",
    "all_codes",
    "all_rules",
    "name_of",
    "preview_codes",
    "rule_by_code",
    "rule_url",
    "severity",
    "status_of",
]

DOCS_BASE_URL = "https://github.com/torchlint/torchlint/blob/main/docs/rules/"
# Modules under torchlint.rules that hold no rule.
_NOT_RULES = ("base", "catalog")


def _walk() -> List[Type["Rule"]]:
    from torchlint.rules.base import Rule

    found: Dict[str, Type[Rule]] = {}
    for info in pkgutil.walk_packages(__path__, prefix=__name__ + "."):
        if info.name.rsplit(".", 1)[-1] in _NOT_RULES:
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
def all_rules() -> Tuple[Type["Rule"], ...]:
    """Every rule class, sorted by code (TL000, the file-level syntax error, first)."""
    return tuple(_walk())


def rule_by_code(code: str) -> Type["Rule"]:
    """The rule class for `code`; KeyError for an unknown code."""
    for rule in all_rules():
        if rule.CODE == code.upper():
            return rule
    raise KeyError(code)


def all_codes() -> List[str]:
    """Every rule code, sorted (from the catalog: imports no rule)."""
    return sorted(CATALOG)


def name_of(code: str) -> str:
    """The rule's name; KeyError for an unknown code."""
    return CATALOG[code.upper()]


def severity(code: str) -> str:
    """ "error" (the file could not be analysed: TL000) or "warning"."""
    return SEVERITIES.get(code.upper(), "warning")


def rule_url(code: str) -> Optional[str]:
    """Where a rule's documentation lives (docs/rules/<name>.md); None for an unknown code."""
    name = CATALOG.get(code.upper())
    return f"{DOCS_BASE_URL}{name}.md" if name else None


def status_of(code: str) -> RuleStatus:
    """A rule's recorded status (stable or preview) and its first-sight figures."""
    code = code.upper()
    return STATUS.get(code, ALWAYS_ON if code in ALWAYS_REPORTED else RuleStatus(Stability.PREVIEW))


def preview_codes() -> FrozenSet[str]:
    """Codes of the rules that are on only in preview mode."""
    return frozenset(c for c in CATALOG if status_of(c).is_preview)
