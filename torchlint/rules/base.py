"""The rule framework: a rule is one small class with its code, name, docs and
examples; it reads the shared facts and reports nodes.

A rule's docstring holds Ruff's sections (## What it does, ## Why is this bad?,
## Example, ## Use instead, ## Fix safety, optionally ## Options and
## References). Its `valid`/`invalid` examples generate tests and docs.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar, Dict, List, Mapping, Optional, Sequence, Union

import libcst as cst

from torchlint.analysis.walk import contains
from torchlint.findings import Applicability

if TYPE_CHECKING:
    from torchlint.analysis import Analysis
    from torchlint.analysis.facts import Facts
    from torchlint.analysis.project import FileView

Replacement = Union[cst.CSTNode, cst.FlattenSentinel[cst.CSTNode], cst.RemovalSentinel]


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
    # The default message (rules may report a more specific one); it may be a
    # template (`{name}`) that the rule fills in.
    MESSAGE: ClassVar[str]
    # What the rule finds, in one line without placeholders, for places that
    # name the rule rather than a finding (SARIF's rule descriptions); None:
    # MESSAGE, which then must not be a template.
    TITLE: ClassVar[Optional[str]] = None
    # Fix title shown to users and editors; None when the rule never fixes.
    FIX_TITLE: ClassVar[Optional[str]] = None
    APPLICABILITY: ClassVar[Optional[Applicability]] = None
    # (D): fires only where a device is in play.
    REQUIRES_DEVICE: ClassVar[bool] = False
    # What it reports costs on an accelerator only: silent in a file that chooses the CPU
    # (`device = "cpu"`, a literal config's `"device": "cpu"`; `Places.chooses_cpu`).
    ACCELERATOR_COST: ClassVar[bool] = False
    # Silent in test code and dead branches (`Roles.quiet`): its reports there are dropped.
    QUIET_IN_TESTS: ClassVar[bool] = False
    # "warning" for every rule but TL000 ("error": the file could not be analysed).
    SEVERITY: ClassVar[str] = "warning"
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def check(self, ctx: "RuleContext") -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @classmethod
    def may_report(cls, text: str, project: "FileView") -> bool:
        """False only when `check` can report nothing on a module of `text`
        (a necessary condition read from the text, and the project index as
        the file asks it). A file no enabled rule may report on is only
        checked for syntax (torchlint/engine/precheck.py)."""
        return True

    @classmethod
    def device_in_play(cls, analysis: "Analysis") -> bool:
        """For a (D) rule: a device is in play where it may report (the file
        puts something on an accelerator; a rule may know more places)."""
        return analysis.places.accelerator_in_play()

    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def title(cls) -> str:
        """TITLE, or MESSAGE when the rule needs no separate title."""
        return cls.TITLE or cls.MESSAGE

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
        if rule.QUIET_IN_TESTS:
            site = self.facts.site_of_node(node)
            if site is not None and self.analysis.roles.quiet(site):
                return
        if replacements:
            replacements = fold_nested(dict(replacements))
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


def fold_nested(replacements: Dict[cst.CSTNode, Replacement]) -> Optional[Dict[cst.CSTNode, Replacement]]:
    """`replacements` with each replaced node that lies inside another replaced
    node folded into the outer one's replacement (a whole-module transform
    would otherwise drop the inner change). None when a replacement cannot be
    folded (an inner FlattenSentinel)."""
    keys = list(replacements)
    if len(keys) < 2:
        return dict(replacements)
    out = dict(replacements)
    for inner in keys:
        outer = next((k for k in keys if k is not inner and k in out and contains(k, inner)), None)
        if outer is None:
            continue
        value = out.pop(inner)
        if not isinstance(value, cst.CSTNode):
            return None
        folded = _replace_in(out[outer], inner, value)
        if folded is None:
            return None
        out[outer] = folded
    return out


def _replace_in(value: Replacement, old: cst.CSTNode, new: cst.CSTNode) -> Optional[Replacement]:
    if isinstance(value, cst.FlattenSentinel):
        nodes = [n.deep_replace(old, new) if n is not old and contains(n, old) else n for n in value.nodes]
        return cst.FlattenSentinel(nodes)
    if isinstance(value, cst.CSTNode):
        return value.deep_replace(old, new)
    return None
