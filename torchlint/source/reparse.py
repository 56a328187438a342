"""Incremental parsing: the module of an edited text, re-parsing only the
top-level statements the edit touched and reusing the others' nodes.

A module is a header (comments and blank lines before its first statement),
top-level statements, and a footer; each statement's code, leading comments
included, is a contiguous span of the text. After an edit, the spans that lie
entirely before or after the changed characters keep their nodes (the same
objects: whatever is memoised per node stays valid); the statements the edit
touched, plus one unchanged neighbour on each side, are re-parsed as a chunk
and the module is reassembled. The result is equal (`deep_equals`, and the
same code) to a fresh `parsing.parse` of the new text; tests/test_reparse.py
checks that over thousands of random edits.

Why it is exact. LibCST assigns the lines between two statements (comments,
blank lines) by looking at the lines themselves and at the indentation of the
block that precedes them, so a chunk cut at old statement boundaries and
bounded by an unchanged statement on each side parses as it does inside the
file, provided that:

- the chunk is parsed after a small prelude (`if 1:` and a block indented
  like the file), so its indentation and line endings are read as the file's
  (LibCST takes a module's default indent from its first indented block and
  its default newline from its first line break), and the prelude absorbed
  nothing (an indented comment or an `else:` at the start of the chunk would
  join it: the chunk then grows by one statement backwards);
- the chunk leaves no footer (trailing comments that would belong to the
  next statement: it grows by one statement forwards);
- the file's first indented block and first line break are still those the
  reused statements were parsed with, and the text still ends with a line
  break; otherwise, or when a chunk does not parse, the whole text is parsed
  (which also gives the syntax error's exact message and position).

`parse_statement` is not used: it cannot say where statements end in edited
text (an edit may merge or split them) and reads the indentation from the
snippet itself; a chunk parsed as a module answers both.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple, Union

import libcst as cst

from torchlint.source.codegen import PlainCodegen
from torchlint.source.edits import common_prefix, common_suffix
from torchlint.source.parsing import SourceError, parse

# A chunk larger than this share of the file is not worth splitting out: the
# whole text is parsed instead (same result, less bookkeeping).
WHOLE_FILE_SHARE = 0.6
# Growing a chunk that keeps touching its neighbours stops after this many tries.
MAX_GROWTH = 8

_COMPOUND_PARTS = (
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


class _NotFound:
    pass


_NOT_FOUND = _NotFound()
IndentFound = Union[Optional[str], _NotFound]


@dataclass
class Parsed:
    """A text and its module, with the text's offset where each top-level
    statement begins (computed on demand: it needs each statement's code)."""

    text: str
    module: cst.Module
    # Each statement's code, in order (None until computed). Shared with the
    # renderer (torchlint/engine/render_cache.py), which produces them as it goes.
    codes: List[Optional[str]] = field(default_factory=list)
    whole_parses: int = 0  # 1 when this text was parsed whole (for tests and stats)
    _starts: Optional[List[int]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.codes:
            self.codes = [None] * len(self.module.body)

    def statement_code(self, i: int) -> str:
        code = self.codes[i]
        if code is None:
            code = self.codes[i] = statement_code(self.module, self.module.body[i])
        return code

    def starts(self) -> Optional[List[int]]:
        """Offsets where each statement begins, and the footer (n + 1 values);
        None when the module's code is not exactly the text (LibCST does not
        reproduce a few inputs, such as a backslash before the end of the file)."""
        if self._starts is None:
            module = self.module
            header = _lines_code(module, module.header)
            codes = [self.statement_code(i) for i in range(len(module.body))]
            footer = _lines_code(module, module.footer)
            if not module.has_trailing_newline or header + "".join(codes) + footer != self.text:
                self._starts = []
            else:
                out = [len(header)]
                for code in codes:
                    out.append(out[-1] + len(code))
                self._starts = out
        return self._starts or None


def statement_code(module: cst.Module, statement: cst.CSTNode) -> str:
    """The code of a top-level statement of `module`, as the module renders it."""
    state = PlainCodegen(default_indent=module.default_indent, default_newline=module.default_newline)
    statement._codegen(state)
    return "".join(state.tokens)


def _lines_code(module: cst.Module, lines: Sequence[cst.EmptyLine]) -> str:
    state = PlainCodegen(default_indent=module.default_indent, default_newline=module.default_newline)
    for line in lines:
        line._codegen(state)
    return "".join(state.tokens)


def parse_whole(text: str) -> Parsed:
    """A fresh parse (`parsing.parse`: guarded, SourceError for bad input)."""
    return Parsed(text, parse(text), whole_parses=1)


def reparse(previous: Optional[Parsed], text: str) -> Parsed:
    """The module of `text`, reusing `previous`'s statements where the edit
    left them alone. Raises SourceError as `parsing.parse` does."""
    if previous is None:
        return parse_whole(text)
    if previous.text == text:
        return previous
    found = _incremental(previous, text)
    return found if found is not None else parse_whole(text)


def _incremental(previous: Parsed, text: str) -> Optional[Parsed]:
    old_module = previous.module
    old = previous.text
    body = old_module.body
    n = len(body)
    if n < 3 or not old_module.has_trailing_newline or not text.endswith(("\n", "\r")):
        return None
    prefix = common_prefix(old, text)
    suffix = common_suffix(old, text, min(len(old), len(text)) - prefix)
    lo, hi = prefix, len(old) - suffix  # the changed characters of the old text: [lo, hi)
    starts = previous.starts()
    if starts is None:
        return None
    first = bisect_right(starts, lo) - 1  # -1: the header
    last = bisect_right(starts, max(lo, hi - 1)) - 1  # n: the footer
    i, j = first - 1, last + 1  # an unchanged neighbour on each side
    delta = len(text) - len(old)
    for _ in range(MAX_GROWTH):
        top, bottom = i < 0, j >= n
        if top and bottom:
            return None
        start = 0 if top else starts[i]
        end = len(text) if bottom else starts[j + 1] + delta
        if end - start > WHOLE_FILE_SHARE * len(text):
            return None
        chunk = _parse_chunk(text[start:end], old_module, top)
        if chunk is None:
            return None
        if chunk.absorbed:
            i -= 1
            continue
        if not bottom and (chunk.module.footer or not chunk.module.has_trailing_newline):
            j += 1
            continue
        keep_before = 0 if top else i
        keep_after = 0 if bottom else n - j - 1
        return _assemble(previous, text, chunk, keep_before, keep_after, top, bottom)
    return None


@dataclass
class _Chunk:
    module: cst.Module  # as parsed (with the prelude, unless at the top)
    statements: Sequence[cst.BaseStatement]  # the chunk's own statements
    absorbed: bool  # the prelude took some of the chunk's text


def _prelude(module: cst.Module) -> str:
    nl, indent = module.default_newline, module.default_indent
    return f"if 1:{nl}{indent}pass{nl}"


def _parse_chunk(chunk: str, old_module: cst.Module, top: bool) -> Optional[_Chunk]:
    prelude = "" if top else _prelude(old_module)
    try:
        module = parse(prelude + chunk)
    except SourceError:
        return None
    if top:
        return _Chunk(module, module.body, False)
    if module.header or not module.body:
        return None
    head = module.body[0]
    absorbed = not isinstance(head, cst.If) or statement_code(module, head) != prelude
    return _Chunk(module, module.body[1:], absorbed)


def _first_indent(node: cst.CSTNode) -> IndentFound:
    """The `indent` of the first indented block in `node` (None: the module's
    default), or _NOT_FOUND."""
    if isinstance(node, cst.IndentedBlock):
        return node.indent
    if not isinstance(node, _COMPOUND_PARTS):
        return _NOT_FOUND
    for child in node.children:
        found = _first_indent(child)
        if found is not _NOT_FOUND:
            return found
    return _NOT_FOUND


def _file_indent(parts: Sequence[Tuple[Sequence[cst.BaseStatement], str]]) -> Optional[str]:
    """The indentation of the first indented block in statement groups, each
    parsed with its own default indent; None where there is no block."""
    for statements, default in parts:
        for statement in statements:
            found = _first_indent(statement)
            if found is not _NOT_FOUND:
                return default if found is None else found  # type: ignore[return-value]
    return None


def _assemble(
    previous: Parsed, text: str, chunk: _Chunk, keep_before: int, keep_after: int, top: bool, bottom: bool
) -> Optional[Parsed]:
    """The module: the old one's first `keep_before` and last `keep_after`
    statements around the chunk's."""
    old = previous.module
    n = len(old.body)
    before = old.body[:keep_before]
    after = old.body[n - keep_after :] if keep_after else ()
    new_body = tuple(before) + tuple(chunk.statements) + tuple(after)
    if not new_body:
        return None
    chunk_default = chunk.module.default_indent
    indent = _file_indent(
        ((before, old.default_indent), (chunk.statements, chunk_default), (after, old.default_indent))
    )
    if (indent if indent is not None else "    ") != old.default_indent:
        return None  # the file's default indentation changed: every block reads differently
    if top and chunk.module.default_newline != old.default_newline:
        return None
    if (
        top
        and any(_first_indent(s) is not _NOT_FOUND for s in chunk.statements)
        and chunk_default != old.default_indent
    ):
        return None
    module = old.with_changes(
        body=new_body,
        header=chunk.module.header if top else old.header,
        footer=chunk.module.footer if bottom else old.footer,
        has_trailing_newline=chunk.module.has_trailing_newline if bottom else old.has_trailing_newline,
    )
    codes: List[Optional[str]] = list(previous.codes[:keep_before])
    codes += [None] * len(chunk.statements)
    codes += previous.codes[n - keep_after :] if keep_after else []
    return Parsed(text, module, codes)


__all__ = ["Parsed", "parse_whole", "reparse", "statement_code"]
