"""The rules stage: collect a module's facts once, then run every enabled rule
over them. A rule that crashes (or recurses too deep) becomes a Problem, its
reports are dropped, and the other rules go on."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, AbstractSet, Callable, List, Optional, Sequence, Tuple, Type

import libcst as cst

from torchlint.analysis import Analysis
from torchlint.findings import Problem
from torchlint.rules import all_rules
from torchlint.rules.base import Report, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView

log = logging.getLogger("torchlint")


def enabled_rules(enabled: AbstractSet[str]) -> List[Type[Rule]]:
    """The rule classes whose codes are in `enabled`, in code order."""
    return [r for r in all_rules() if r.CODE in enabled]


def checked(
    module: cst.Module,
    source: str,
    path: str,
    enabled: AbstractSet[str],
    checkpoint: Optional[Callable[[], None]] = None,
    displayed: AbstractSet[int] = frozenset(),
    project: Optional[FileView] = None,
    cells: Sequence[int] = (),
    statement_code: Optional[Callable[[int], str]] = None,
) -> Tuple[List[Report], List[Problem], Analysis]:
    """Every enabled rule's reports on `module`, in rule order, and the problems
    of the rules that failed. An error in the shared facts propagates: it is
    the whole file's problem, not one rule's. `checkpoint` is called before
    each rule: it may raise (a BaseException, such as the language server's
    cancellation of a stale lint) to stop the run there. `displayed`: rows
    where a notebook cell's displayed last expression starts; `cells`: rows
    where its cells start. `project`: the project index as this file asks it
    (None: the file alone). `statement_code`: the code of top-level statement
    i, where the caller keeps them. Also returns the analysis (its facts' parent map
    tells the renderer which statements hold the reports)."""
    analysis = Analysis(
        module, path, source, project=project, displayed_rows=displayed, cell_rows=cells, statement_code=statement_code
    )
    ctx = RuleContext(module=module, analysis=analysis, path=path, source=source)
    problems: List[Problem] = []
    for rule_cls in enabled_rules(enabled):
        if checkpoint is not None:
            checkpoint()
        try:
            if rule_cls.REQUIRES_DEVICE and not rule_cls.device_in_play(analysis):
                continue
            if rule_cls.ACCELERATOR_COST and analysis.places.chooses_cpu():
                continue
            ctx.rule = rule_cls()
            before = len(ctx.reports)
            try:
                ctx.rule.check(ctx)
            except Exception:
                del ctx.reports[before:]
                raise
        except RecursionError:  # this rule recursed too deep on this file; the others go on
            problems.append(Problem(path, "file too deeply nested for this rule; skipped", rule_cls.CODE))
        except Exception as exc:  # one rule's bug must not hide the others' findings
            log.exception("rule %s crashed on %s", rule_cls.CODE, path)
            problems.append(Problem(path, f"internal error in rule: {type(exc).__name__}: {exc}", rule_cls.CODE))
    return ctx.reports, problems, analysis
