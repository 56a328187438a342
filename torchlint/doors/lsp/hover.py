"""Hover on a rule code in a suppression comment (`# noqa: TL104`,
`# torchlint: ignore[TL104]`): the rule's documentation, as `torchlint rule
TL104` prints it. Pure: no pygls here."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from torchlint.rules import CATALOG

_COMMENT = re.compile(
    r"#\s*(?:noqa\s*:\s*(?P<noqa>[A-Za-z]+[0-9]+(?:[\s,]+[A-Za-z]+[0-9]+)*)"
    r"|torchlint\s*:\s*ignore\[(?P<ignore>[^\]]*)\])",
    re.IGNORECASE,
)
_CODE = re.compile(r"[A-Za-z]+[0-9]+")


@dataclass(frozen=True)
class CodeAt:
    """A rule code in a suppression comment: the code and its columns
    [start, end) as code-point offsets into the line."""

    code: str
    start: int
    end: int


def code_at(line: str, column: int) -> Optional[CodeAt]:
    """The torchlint rule code under `column` (0-based code points) of `line`,
    if it is inside a suppression comment."""
    for comment in _COMMENT.finditer(line):
        group = "noqa" if comment.group("noqa") is not None else "ignore"
        base = comment.start(group)
        for m in _CODE.finditer(comment.group(group) or ""):
            start, end = base + m.start(), base + m.end()
            code = m.group().upper()
            if start <= column <= end and code in CATALOG:
                return CodeAt(code, start, end)
    return None


def rule_markdown(code: str) -> str:
    """The rule's documentation page (Markdown)."""
    from torchlint.doors import rule_docs as ruledocs

    return ruledocs.render_rule_markdown(code)


__all__ = ["CodeAt", "code_at", "rule_markdown"]
