"""Lint and fix one source text: parse once, collect facts once, run every
enabled rule over them, position only what is reported, build fixes."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.analysis.facts import collect_facts
from torchlint.analysis.semantics import Semantics
# FileResult lives with the other plain data so that unpickling one (the cache)
# does not import the engine and LibCST.
from torchlint.findings import Applicability, FileResult, Finding, Fix, Problem
from torchlint.precheck import could_matter, python_accepts
from torchlint.fixes import apply_fix_groups, diff_edits, replace_nodes
from torchlint.rules import TL000, all_rules
from torchlint.rules.base import Report, RuleContext
from torchlint.suppression import parse_suppressions

log = logging.getLogger("torchlint")

MAX_FIX_PASSES = 10


def syntax_error_finding(path: str, message: str, row: int = 1, column: int = 1) -> Finding:
    row = max(1, row)
    column = max(1, column)
    return Finding(TL000[0], TL000[1], message, path, row, column, row, column)


def parse(source: str) -> cst.Module:
    return cst.parse_module(source)


def _parse_or_finding(source: str, path: str):
    try:
        return parse(source), None
    except cst.ParserSyntaxError as exc:
        msg = f"SyntaxError: {exc.message}"
        return None, syntax_error_finding(path, msg, exc.raw_line, exc.raw_column + 1)
    except RecursionError:
        return None, syntax_error_finding(path, "SyntaxError: too deeply nested to parse")
    except (ValueError, TypeError, IndexError) as exc:  # LibCST's tokenizer on odd input
        return None, syntax_error_finding(path, f"SyntaxError: {exc}")


def check_source(source: str, path: str, enabled: FrozenSet[str], precheck: bool = True) -> FileResult:
    """Lint `source` with the rules whose codes are in `enabled`.

    With `precheck` (torchlint/precheck.py), a file that mentions nothing any
    enabled rule looks for is only checked for syntax (TL000)."""
    if precheck and not could_matter(source, [r for r in all_rules() if r.CODE in enabled]):
        if python_accepts(source):
            return FileResult(path)
        _, error = _parse_or_finding(source, path)  # LibCST's verdict and message, as below
        return FileResult(path, (error,) if error is not None else ())
    module, error = _parse_or_finding(source, path)
    if module is None:
        return FileResult(path, (error,))
    try:
        return _check_module(module, source, path, enabled)
    except RecursionError:
        return FileResult(path, (), (Problem(path, "file too deeply nested to analyse; skipped"),))


def _check_module(module: cst.Module, source: str, path: str, enabled: FrozenSet[str]) -> FileResult:
    facts = collect_facts(module)
    sem = Semantics(facts)
    ctx = RuleContext(module=module, facts=facts, sem=sem, path=path, source=source)
    problems: List[Problem] = []
    for rule_cls in all_rules():
        if rule_cls.CODE not in enabled:
            continue
        try:
            if rule_cls.REQUIRES_DEVICE and not sem.device_in_play():
                continue
            ctx.rule = rule_cls()
            before = len(ctx.reports)
            try:
                ctx.rule.check(ctx)
            except Exception:
                del ctx.reports[before:]
                raise
        except RecursionError:
            raise
        except Exception as exc:  # one rule's bug must not hide the others' findings
            log.exception("rule %s crashed on %s", rule_cls.CODE, path)
            problems.append(Problem(path, f"internal error in rule: {type(exc).__name__}: {exc}", rule_cls.CODE))
    if not ctx.reports:
        return FileResult(path, (), tuple(problems))
    findings = _to_findings(module, source, path, ctx.reports, problems)
    suppressions = parse_suppressions(source)
    findings = [f for f in findings if not suppressions.suppressed(f.code, f.row)]
    findings.sort(key=Finding.sort_key)
    return FileResult(path, tuple(_dedupe(findings)), tuple(problems))


def _dedupe(findings: Sequence[Finding]) -> List[Finding]:
    seen = set()
    out = []
    for f in findings:
        key = (f.code, f.row, f.column, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _to_findings(module, source, path, reports: Sequence[Report], problems: List[Problem]) -> List[Finding]:
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    out: List[Finding] = []
    for rep in reports:
        pos = positions.get(rep.node)
        if pos is None:
            problems.append(Problem(path, "internal error: reported a node outside the module", rep.rule.CODE))
            continue
        fix = None
        if rep.replacements:
            try:
                new_code = replace_nodes(module, rep.replacements).code
                edits = diff_edits(source, new_code)
                if edits:
                    fix = Fix(rep.applicability or Applicability.SAFE, rep.fix_message or rep.rule.FIX_TITLE or "", edits)
            except Exception as exc:
                log.exception("fix of %s failed on %s", rep.rule.CODE, path)
                problems.append(Problem(path, f"internal error building fix: {type(exc).__name__}: {exc}", rep.rule.CODE))
        out.append(
            Finding(
                code=rep.rule.CODE,
                name=rep.rule.NAME,
                message=rep.message,
                path=path,
                row=pos.start.line,
                column=pos.start.column + 1,
                end_row=pos.end.line,
                end_column=pos.end.column + 1,
                fix=fix,
                noqa_row=pos.start.line,
            )
        )
    return out


def fix_source(source: str, path: str, enabled: FrozenSet[str], unsafe: bool = False) -> FileResult:
    """Apply fixes until none applies (at most MAX_FIX_PASSES passes).

    Each pass applies every non-overlapping fix once, then re-lints; a pass whose
    result would not parse is discarded and reported, never returned.
    """
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    current = source
    total = 0
    problems: List[Problem] = []
    result = check_source(current, path, enabled)
    for _ in range(MAX_FIX_PASSES):
        groups = [f.fix.edits for f in result.findings if f.fix is not None and f.fix.applicability in allowed]
        if not groups:
            break
        candidate, applied = apply_fix_groups(current, groups)
        if applied == 0 or candidate == current:
            break
        try:
            parse(candidate)
        except Exception:
            problems.append(Problem(path, "a fix produced code that does not parse; it was not applied"))
            break
        current = candidate
        total += applied
        result = check_source(current, path, enabled)
    all_problems = tuple(problems) + tuple(p for p in result.problems if p not in problems)
    return FileResult(path, result.findings, all_problems, current, total)
