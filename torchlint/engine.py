"""Lint and fix one source text: parse once, collect facts once, run every
enabled rule over them, position only what is reported, build fixes."""
from __future__ import annotations

import ast
import logging
import os
import re
import threading
import warnings
from dataclasses import dataclass
from typing import FrozenSet, List, Optional, Sequence, Tuple

import libcst as cst
from libcst.metadata import PositionProvider
from libcst.metadata.position_provider import PositionProvidingCodegenState

from torchlint.analysis import Analysis
# FileResult lives with the other plain data so that unpickling one (the cache)
# does not import the engine and LibCST.
from torchlint.findings import Applicability, FileResult, Finding, Fix, Problem
from torchlint.fixes import LineIndex, apply_fix_groups, diff_edits, replace_nodes
from torchlint.node_edits import local_edits
from torchlint.precheck import could_matter
from torchlint.rules import TL000, all_rules
from torchlint.rules.base import Report, RuleContext
from torchlint.suppression import parse_suppressions

log = logging.getLogger("torchlint")

MAX_FIX_PASSES = 10


def syntax_error_finding(path: str, message: str, row: int = 1, column: int = 1) -> Finding:
    row = max(1, row)
    column = max(1, column)
    return Finding(TL000[0], TL000[1], message, path, row, column, row, column)


# CPython refuses more than 200 nested brackets ("too many nested parentheses");
# LibCST's native parser has no such limit and overflows its stack somewhere
# past 1,000 (a segfault, not an exception), so the same limit applies here.
MAX_BRACKET_DEPTH = 200
# A logical line with more code than this (strings excluded) may hold a long
# operator chain (`-` * 5000, `a if b else` * 3000) deep enough to exhaust the
# native parser's stack: such files are checked by CPython's parser first and,
# if it accepts them, parsed by LibCST in a thread with a large stack.
LONG_LOGICAL_LINE = 2000
BIG_STACK_BYTES = 512 * 1024 * 1024

_SCAN = re.compile(
    r"[rRbBuUfF]{0,2}(?:'''(?:[^'\\]|\\.|'(?!''))*(?:'''|$)"
    r'|"""(?:[^"\\]|\\.|"(?!""))*(?:"""|$)'
    r"|'(?:[^'\\\r\n]|\\.)*'?"
    r'|"(?:[^"\\\r\n]|\\.)*"?)'
    r"|#[^\r\n]*|\\\r?\n|[()\[\]{}]|\r\n|\r|\n",
    re.S,
)


_STRING_PREFIX = re.compile(r"[rRbBuUfF]*")
_NEWLINE = re.compile(r"\r\n|\r|\n")


class SourceError(Exception):
    """Source that cannot be parsed: a message in CPython's words and where."""

    def __init__(self, message: str, row: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.row = max(1, row)
        self.column = max(1, column)


@dataclass
class _Shape:
    depth: int = 0
    depth_offset: int = 0
    longest: int = 0
    longest_offset: int = 0


def _shape(source: str) -> _Shape:
    """Bracket depth and longest logical line (string and comment text excluded),
    from a regex scan: a cheap gate, not a tokenizer; CPython's parser decides."""
    shape = _Shape()
    depth = 0
    start = 0
    excluded = 0
    for m in _SCAN.finditer(source):
        tok = m.group()
        c = tok[0]
        if c in "([{":
            depth += 1
            if depth > shape.depth:
                shape.depth, shape.depth_offset = depth, m.start()
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif c in "\r\n":
            if depth == 0:
                length = m.start() - start - excluded
                if length > shape.longest:
                    shape.longest, shape.longest_offset = length, start
                start, excluded = m.end(), 0
        elif c == "#":
            excluded += len(tok)
        elif c != "\\":
            prefix = _STRING_PREFIX.match(tok).group()
            if "f" in prefix.lower():
                # f-string replacement fields are code: count their brackets and length.
                inner = _fstring_depth(tok)
                if depth + inner > shape.depth:
                    shape.depth, shape.depth_offset = depth + inner, m.start()
            else:
                excluded += len(tok)
    length = len(source) - start - excluded
    if length > shape.longest:
        shape.longest, shape.longest_offset = length, start
    return shape


def _fstring_depth(tok: str) -> int:
    depth = deepest = 0
    for ch in tok:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth = max(0, depth - 1)
    return deepest


def _row_col(source: str, offset: int) -> Tuple[int, int]:
    starts = [0] + [m.end() for m in _NEWLINE.finditer(source, 0, offset)]
    return len(starts), offset - starts[-1] + 1


TOO_COMPLEX = "SyntaxError: too complex to parse (expressions nested too deeply)"


def _cpython_error(source: str) -> Optional[SourceError]:
    """What CPython's own parser says about `source` (None: it accepts it)."""
    try:
        with warnings.catch_warnings():  # SyntaxWarnings are not ours to print
            warnings.simplefilter("ignore")
            compile(source, "<torchlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        kind = type(exc).__name__
        msg = exc.msg or "invalid syntax"
        return SourceError(f"{kind}: {msg}", exc.lineno or 1, exc.offset or 1)
    except (RecursionError, MemoryError):
        return SourceError(TOO_COMPLEX)
    except ValueError as exc:  # 3.11: "source code string cannot contain null bytes"
        return SourceError(f"SyntaxError: {exc}")
    return None


def _clean_libcst_message(exc: cst.ParserSyntaxError) -> str:
    msg = re.sub(r"^(?:parser|tokenizer) error: ", "", exc.message)
    msg = re.sub(r"^error at \d+:\d+: ", "", msg)
    return f"SyntaxError: {msg}"


_STACK_LOCK = threading.Lock()


def _reset_stack_lock() -> None:  # a child forked while another thread held it
    global _STACK_LOCK
    _STACK_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_stack_lock)


def _in_big_stack(fn, *args):
    """Run `fn` in a thread with a large stack (LibCST's native parser recurses
    once per nesting level) and return its result or raise its exception."""
    box: list = []

    def target() -> None:
        try:
            box.append((True, fn(*args)))
        except BaseException as exc:  # handed back to the caller's thread
            box.append((False, exc))

    thread = None
    with _STACK_LOCK:
        old = threading.stack_size()
        try:
            for size in (BIG_STACK_BYTES, BIG_STACK_BYTES // 8):
                try:
                    threading.stack_size(size)
                    thread = threading.Thread(target=target, name="torchlint-parse", daemon=True)
                    thread.start()
                    break
                except (RuntimeError, ValueError, MemoryError):  # no room for that stack
                    thread = None
        finally:
            threading.stack_size(old)
    if thread is None:
        return fn(*args)
    thread.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


def parse(source: str) -> cst.Module:
    """Parse `source` with LibCST. Anything that cannot be parsed raises
    SourceError (with CPython's message and position where CPython has one);
    nothing crashes the process."""
    try:
        source.encode("utf-8")
    except UnicodeEncodeError as exc:
        row, col = _row_col(source, exc.start)
        raise SourceError(f"SyntaxError: unpaired surrogate U+{ord(source[exc.start]):04X} in source", row, col) from None
    shape = _shape(source)
    risky = shape.depth > MAX_BRACKET_DEPTH // 2 or shape.longest > LONG_LOGICAL_LINE
    if risky:
        error = _cpython_error(source)
        if error is not None and (error.message == TOO_COMPLEX or shape.depth > MAX_BRACKET_DEPTH):
            if error.message == TOO_COMPLEX:
                error.row, error.column = _row_col(source, shape.longest_offset)
            raise error
        if shape.depth > MAX_BRACKET_DEPTH:
            row, col = _row_col(source, shape.depth_offset)
            raise SourceError("SyntaxError: too many nested parentheses", row, col)
    try:
        if risky:
            return _in_big_stack(cst.parse_module, source)
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        better = _cpython_error(source)
        if better is not None:
            raise better from None
        raise SourceError(_clean_libcst_message(exc), exc.raw_line, exc.raw_column + 1) from None
    except RecursionError:
        raise SourceError(TOO_COMPLEX) from None
    except (ValueError, TypeError, IndexError) as exc:  # LibCST's tokenizer on odd input
        better = _cpython_error(source)
        if better is not None:
            raise better from None
        raise SourceError(f"SyntaxError: {exc}") from None


def _parse_or_finding(source: str, path: str):
    try:
        return parse(source), None
    except SourceError as exc:
        return None, syntax_error_finding(path, exc.message, exc.row, exc.column)


BOM = "\ufeff"


def check_source(source: str, path: str, enabled: FrozenSet[str], precheck: bool = True) -> FileResult:
    """Lint `source` with the rules whose codes are in `enabled`. A leading BOM
    is not part of the text (as for CPython): positions and edits ignore it.

    With `precheck` (torchlint/precheck.py), a file that mentions nothing any
    enabled rule looks for is only checked for syntax (TL000) by CPython's
    parser, falling back to the full parse for its message when that fails."""
    if source.startswith(BOM):
        source = source[1:]
    if precheck and not could_matter(source, [r for r in all_rules() if r.CODE in enabled]):
        if _cpython_error(source) is None:
            return FileResult(path)
    module, error = _parse_or_finding(source, path)
    if module is None:
        return FileResult(path, (error,))
    try:
        return _check_module(module, source, path, enabled)
    except RecursionError:
        return FileResult(path, (), (Problem(path, "file too deeply nested to analyse; skipped"),))
    except Exception as exc:  # shared analysis (facts, positions, suppressions): this file only
        log.exception("analysis failed on %s", path)
        return FileResult(path, (), (Problem(path, f"internal error in analysis: {type(exc).__name__}: {exc}"),))


def _check_module(module: cst.Module, source: str, path: str, enabled: FrozenSet[str]) -> FileResult:
    analysis = Analysis(module, path, source)
    ctx = RuleContext(module=module, analysis=analysis, path=path, source=source)
    problems: List[Problem] = []
    for rule_cls in all_rules():
        if rule_cls.CODE not in enabled:
            continue
        try:
            if rule_cls.REQUIRES_DEVICE and not analysis.places.accelerator_in_play():
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


def positions_and_code(module: cst.Module):
    """Every node's PositionProvider range, and the module's code, from ONE
    codegen pass: what `MetadataWrapper(...).resolve(PositionProvider)` plus
    `module.code` compute, without the wrapper's extra tree visit (about half
    its cost) and without a second codegen. Run only for files with findings."""
    provider = PositionProvider()
    state = PositionProvidingCodegenState(
        default_indent=module.default_indent, default_newline=module.default_newline, provider=provider
    )
    module._codegen(state)
    return provider._computed, "".join(state.tokens)


def _to_findings(module, source, path, reports: Sequence[Report], problems: List[Problem]) -> List[Finding]:
    positions, code = positions_and_code(module)
    index = LineIndex(source)
    out: List[Finding] = []
    roundtrip: Optional[bool] = None
    for rep in reports:
        pos = positions.get(rep.node)
        if pos is None:
            problems.append(Problem(path, "internal error: reported a node outside the module", rep.rule.CODE))
            continue
        fix = None
        if rep.replacements and roundtrip is None:
            # LibCST does not reproduce some sources exactly (a final lone \r is
            # dropped); a fix diffed against such a source would lose that text.
            roundtrip = code == source
            if not roundtrip:
                log.debug("%s does not round-trip through LibCST; fixes withheld", path)
        if rep.replacements and roundtrip:
            try:
                edits = local_edits(module, source, index, positions, rep.replacements)
                if edits is None:  # not provably local: transform the module and diff
                    edits = diff_edits(source, replace_nodes(module, rep.replacements).code)
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

    Each pass applies every non-overlapping fix once, then re-lints, so fixes
    that overlap are applied one at a time against fresh positions. A pass whose
    combined result would not parse is retried fix by fix; a fix whose result
    does not parse is refused and reported, never returned. Fixes still offered
    after the last pass are reported as not converging.
    """
    if source.startswith(BOM):
        result = fix_source(source[1:], path, enabled, unsafe)
        return FileResult(path, result.findings, result.problems, BOM + (result.fixed_source or ""), result.fixes_applied)
    allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
    current = source
    total = 0
    problems: List[Problem] = []
    refused: set = set()  # (code, edits) of fixes whose output did not parse
    result = check_source(current, path, enabled)
    if result.findings and result.findings[0].code == TL000[0] and len(result.findings) == 1:
        return FileResult(path, result.findings, result.problems, current, 0)
    converged = False
    for _ in range(MAX_FIX_PASSES):
        fixes = [
            (f.code, f.fix.edits)
            for f in result.findings
            if f.fix is not None and f.fix.applicability in allowed and (f.code, f.fix.edits) not in refused
        ]
        if not fixes:
            converged = True
            break
        candidate, applied = apply_fix_groups(current, [edits for _, edits in fixes])
        if applied and candidate != current and not _parses(candidate):
            candidate, applied = _apply_one_by_one(current, fixes, refused, problems, path)
        if applied == 0 or candidate == current:
            converged = True
            break
        current = candidate
        total += applied
        result = check_source(current, path, enabled)
    if not converged:
        codes = sorted({f.code for f in result.findings if f.fix is not None and f.fix.applicability in allowed})
        if codes:
            problems.append(
                Problem(path, f"fixes did not converge after {MAX_FIX_PASSES} passes ({', '.join(codes)}); kept the last result")
            )
    all_problems = tuple(problems) + tuple(p for p in result.problems if p not in problems)
    return FileResult(path, result.findings, all_problems, current, total)


def _parses(text: str) -> bool:
    try:
        parse(text)
    except Exception:
        return False
    return True


def _apply_one_by_one(current, fixes, refused, problems, path):
    """Apply fixes singly, keeping each whose result still parses."""
    applied = 0
    for code, edits in fixes:
        # Positions are relative to `current` as linted: only the first fix is
        # safe to apply on an already-changed text, so stop after one success;
        # the next pass re-lints and offers the rest again.
        candidate, n = apply_fix_groups(current, [edits])
        if n and candidate != current and _parses(candidate):
            return candidate, 1
        refused.add((code, edits))
        problem = Problem(path, "a fix produced code that does not parse; it was not applied", code)
        if problem not in problems:
            problems.append(problem)
    return current, applied
