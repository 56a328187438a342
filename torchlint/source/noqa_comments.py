"""Writing `# noqa: CODE` comments: the edits that suppress each finding on its line.

- The comment goes at the end of the line a finding is reported on (its
  `noqa_row`), the line suppression reads (torchlint/source/suppression.py). Codes
  are merged into a `# noqa: ...` comment already there (`# noqa: E501`
  becomes `# noqa: E501, TL104`), or into a `# torchlint: ignore[...]`
  comment; otherwise `  # noqa: TL104` is appended (after any other comment).
- It never breaks code: a line whose end lies inside a string (a multi-line
  string or f-string) or that continues with a backslash cannot take a
  comment, so its findings are left alone and reported as warnings.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, List, Optional, Set, Tuple

from torchlint.findings import Edit, Finding, Problem

_NOQA = re.compile(r"#\s*noqa(?P<colon>:\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)
_IGNORE = re.compile(r"#\s*torchlint:\s*ignore\[(?P<codes>[^\]]*)\]", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")
_NEWLINE = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class _Lines:
    """What tokenizing a module tells about its lines."""

    comments: Dict[int, Tuple[int, str]]  # row -> (0-based column, the comment's text)
    blocked: Dict[int, str]  # rows that cannot end with a comment -> why


def _scan(text: str) -> _Lines:
    comments: Dict[int, Tuple[int, str]] = {}
    blocked: Dict[int, str] = {}
    fstring_start = getattr(tokenize, "FSTRING_START", None)  # Python 3.12+
    fstring_end = getattr(tokenize, "FSTRING_END", None)
    open_fstrings: List[int] = []
    tokens = tokenize.generate_tokens(io.StringIO(text, newline="").readline)
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = (tok.start[1], tok.string)
        elif fstring_start is not None and tok.type == fstring_start:
            open_fstrings.append(tok.start[0])
        elif fstring_end is not None and tok.type == fstring_end and open_fstrings:
            for row in range(open_fstrings.pop(), tok.end[0]):
                blocked.setdefault(row, "ends inside a string")
        elif tok.type not in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT):
            for row in range(tok.start[0], tok.end[0]):  # a token over several lines: a string
                blocked.setdefault(row, "ends inside a string")
    for row, line in enumerate(_NEWLINE.split(text), start=1):
        if row not in blocked and row not in comments and line.rstrip().endswith("\\"):
            blocked[row] = "continues with a backslash"
    return _Lines(comments, blocked)


def _merged(codes: List[str], new: Set[str]) -> List[str]:
    seen = {c.upper() for c in codes}
    return codes + sorted(c for c in new if c.upper() not in seen)


def _edit(row: int, line: str, codes: Set[str], comment: Optional[Tuple[int, str]]) -> Optional[Edit]:
    """The edit that suppresses `codes` on `line` (row `row`), or None when
    its comment already does."""
    if comment is not None:
        col, text = comment
        m = _NOQA.search(text)
        if m is not None:
            if not m.group("colon"):
                return None  # a bare noqa comment suppresses every code already
            old = _CODE.findall(m.group("codes"))
            new = _merged(old, codes)
            if len(new) == len(old):
                return None
            start, end = col + m.start(), col + m.end()
            return Edit(row, start + 1, row, end + 1, f"# noqa: {', '.join(new)}")
        m = _IGNORE.search(text)
        if m is not None:
            old = _CODE.findall(m.group("codes"))
            new = _merged(old, codes)
            if len(new) == len(old):
                return None
            start, end = col + m.start(), col + m.end()
            return Edit(row, start + 1, row, end + 1, f"# torchlint: ignore[{', '.join(new)}]")
    body = line.rstrip()
    return Edit(row, len(body) + 1, row, len(line) + 1, f"  # noqa: {', '.join(sorted(codes))}")


def noqa_edits(text: str, findings: List[Finding], where) -> Tuple[List[Edit], List[Problem]]:
    """The edits that add or extend a suppression comment on each line of
    `text` a finding is reported on (its noqa_row, in `text`'s rows), and a
    warning for each line that cannot take one; `where(row)` names a row."""
    by_row: Dict[int, Set[str]] = {}
    for f in findings:
        if f.code == "TL000":
            continue
        by_row.setdefault(f.noqa_row if f.noqa_row is not None else f.row, set()).add(f.code)
    if not by_row:
        return [], []
    info = _scan(text)
    lines = _NEWLINE.split(text)
    edits: List[Edit] = []
    warnings: List[Problem] = []
    for row in sorted(by_row):
        codes = by_row[row]
        if row > len(lines):
            continue
        if row in info.blocked:
            message = (
                f"cannot add `# noqa: {', '.join(sorted(codes))}`: the line {info.blocked[row]}; "
                "suppress it with per-file-ignores or move the code"
            )
            warnings.append(Problem(where(row), message))
            continue
        edit = _edit(row, lines[row - 1], codes, info.comments.get(row))
        if edit is not None:
            edits.append(edit)
    return edits, warnings
