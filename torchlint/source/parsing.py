"""Parse Python source with LibCST, guarded: anything that cannot be parsed
raises `SourceError` (CPython's message and position where CPython has one)
and nothing crashes the process.

LibCST's native parser has limits CPython's does not share: it overflows its
stack on deeply nested brackets or very long operator chains (a segfault, not
an exception). A cheap regex scan (`_shape`) gates such files: CPython's own
parser judges them first, and LibCST then parses them in a thread with a large
stack.
"""

from __future__ import annotations

import ast
import os
import re
import threading
import warnings
from dataclasses import dataclass
from typing import Optional, Tuple

import libcst as cst

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
            prefix = tok[: len(tok) - len(tok.lstrip("rRbBuUfF"))]  # the string's prefix letters
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


def cpython_error(source: str) -> Optional[SourceError]:
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
        raise SourceError(
            f"SyntaxError: unpaired surrogate U+{ord(source[exc.start]):04X} in source", row, col
        ) from None
    shape = _shape(source)
    risky = shape.depth > MAX_BRACKET_DEPTH // 2 or shape.longest > LONG_LOGICAL_LINE
    if risky:
        error = cpython_error(source)
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
        better = cpython_error(source)
        if better is not None:
            raise better from None
        raise SourceError(_clean_libcst_message(exc), exc.raw_line, exc.raw_column + 1) from None
    except RecursionError:
        raise SourceError(TOO_COMPLEX) from None
    except (ValueError, TypeError, IndexError, cst.CSTValidationError) as exc:
        # LibCST's tokenizer on odd input; a node LibCST's parser builds but
        # refuses (a character newer than this Python's Unicode tables)
        better = cpython_error(source)
        if better is not None:
            raise better from None
        raise SourceError(f"SyntaxError: {exc}") from None
