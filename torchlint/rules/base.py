"""The rule framework: a rule is one small class with its code, name, docs and
examples; it reads the shared facts and reports nodes.

A rule's docstring holds Ruff's sections (## What it does, ## Why is this bad?,
## Example, ## Use instead, ## Fix safety, optionally ## Options and
## References). Its `valid`/`invalid` examples generate tests and docs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, List, Mapping, Optional, Sequence, Union

import libcst as cst

from torchlint.findings import Applicability

if TYPE_CHECKING:
    from torchlint.analysis import Analysis
    from torchlint.analysis.facts import Facts

Replacement = Union[cst.CSTNode, cst.FlattenSentinel, cst.RemovalSentinel]


@dataclass(frozen=True)
class Invalid:
    """An example the rule must flag. `fixed` is the source after the fix
    (None: the rule offers no fix here). `line` is the expected report line."""

    code: str
    fixed: Optional[str] = None
    line: Optional[int] = None
    unsafe: bool = False


@dataclass
class Report:
    """A rule's raw report: the node to point at and, optionally, node replacements
    that make up its fix."""

    rule: "Rule"
    node: cst.CSTNode
    message: str
    replacements: Optional[Mapping[cst.CSTNode, Replacement]] = None
    fix_message: Optional[str] = None
    applicability: Optional[Applicability] = None


class Rule:
    CODE: ClassVar[str]
    NAME: ClassVar[str]
    # The default message (rules may report a more specific one).
    MESSAGE: ClassVar[str]
    # Fix title shown to users and editors; None when the rule never fixes.
    FIX_TITLE: ClassVar[Optional[str]] = None
    APPLICABILITY: ClassVar[Optional[Applicability]] = None
    # (D): fires only where a device is in play.
    REQUIRES_DEVICE: ClassVar[bool] = False
    # "warning" for every rule but TL000 ("error": the file could not be analysed).
    SEVERITY: ClassVar[str] = "warning"
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def check(self, ctx: "RuleContext") -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def fix_availability(cls) -> str:
        if cls.APPLICABILITY is None:
            return "none"
        return str(cls.APPLICABILITY)


@dataclass
class RuleContext:
    """What a rule sees: the module, the shared analysis of it, and `report`."""

    module: cst.Module
    analysis: "Analysis"
    path: str
    source: str
    reports: List[Report] = field(default_factory=list)
    rule: Optional[Rule] = None

    @property
    def facts(self) -> "Facts":
        return self.analysis.facts

    def report(
        self,
        node: cst.CSTNode,
        message: Optional[str] = None,
        replacements: Optional[Mapping[cst.CSTNode, Replacement]] = None,
        fix_message: Optional[str] = None,
        applicability: Optional[Applicability] = None,
    ) -> None:
        assert self.rule is not None
        rule = self.rule
        self.reports.append(
            Report(
                rule=rule,
                node=node,
                message=message or rule.MESSAGE,
                replacements=replacements,
                fix_message=fix_message or rule.FIX_TITLE,
                applicability=applicability or rule.APPLICABILITY,
            )
        )

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)
