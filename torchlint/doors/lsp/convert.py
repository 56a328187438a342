"""Plain conversions between torchlint's findings and LSP's shapes.

No pygls here, so these are unit-testable and cheap to import.

Positions: torchlint's rows are 1-based and its columns are 1-based code
points; LSP's lines are 0-based and its characters count code units of the
negotiated position encoding (UTF-16 unless client and server agree on
UTF-8 or UTF-32), so a character outside the Basic Multilingual Plane (an
emoji) is 2 UTF-16 units and, say, a CJK character 3 UTF-8 units. Lines are
split at "\n" as torchlint's own LineIndex does (a "\r" before it stays at the
end of the line, where no column points past it).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from torchlint.findings import Finding
from torchlint.source.notebook import JsonPositions, NotebookError

UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"

FIX_ALL_KIND = "source.fixAll.torchlint"


class TextLines:
    """A document's lines, converting torchlint (row, column) to LSP (line, character)."""

    def __init__(self, text: str, encoding: str = UTF16) -> None:
        self.text = text
        self.lines = text.split("\n")
        self.encoding = encoding

    def line(self, row: int) -> str:
        """The text of 1-based `row` without its "\n" ("" past the end)."""
        if 1 <= row <= len(self.lines):
            return self.lines[row - 1]
        return ""

    def units(self, s: str) -> int:
        if s.isascii() or self.encoding == UTF32:
            return len(s)
        if self.encoding == UTF8:
            return len(s.encode("utf-8", "surrogatepass"))
        return len(s.encode("utf-16-le", "surrogatepass")) // 2

    def position(self, row: int, column: int) -> Tuple[int, int]:
        """0-based (line, character in code units) of torchlint's 1-based (row, column)."""
        row = max(1, row)
        if row > len(self.lines):  # the end of a file: after its last line break
            return len(self.lines) - 1, self.units(self.lines[-1])
        line = self.lines[row - 1]
        return row - 1, self.units(line[: max(0, column - 1)])

    def span(self, row: int, column: int, end_row: int, end_column: int) -> Tuple[Tuple[int, int], Tuple[int, int]]:
        return self.position(row, column), self.position(end_row, end_column)

    def finding_span(self, f: Finding) -> Tuple[Tuple[int, int], Tuple[int, int]]:
        return self.span(f.row, f.column, f.end_row, f.end_column)

    def column(self, line: int, character: int) -> int:
        """0-based code-point column of LSP `character` (code units) on 0-based `line`."""
        text = self.line(line + 1)
        if text.isascii() or self.encoding == UTF32:
            return min(character, len(text))
        units = 0
        for i, ch in enumerate(text):
            if units >= character:
                return i
            units += self.units(ch)
        return len(text)

    def offset_position(self, offset: int) -> Tuple[int, int]:
        """0-based (line, character in code units) of an offset into the text."""
        if not hasattr(self, "_starts"):
            starts = [0]
            for text in self.lines[:-1]:
                starts.append(starts[-1] + len(text) + 1)
            self._starts = starts
        line = max(0, bisect_right(self._starts, offset) - 1)
        return line, self.units(self.lines[line][: offset - self._starts[line]])


class NotebookLines(TextLines):
    """A Jupyter notebook open as JSON text: its findings carry a cell and rows
    relative to that cell, placed here on the characters of that cell's
    "source" in the JSON."""

    def __init__(self, text: str, encoding: str, positions: JsonPositions) -> None:
        super().__init__(text, encoding)
        self.positions = positions

    def finding_span(self, f: Finding) -> Tuple[Tuple[int, int], Tuple[int, int]]:
        if f.cell is None:  # a notebook that cannot be read: TL000 at its top
            return super().finding_span(f)
        start = self.positions.offset(f.cell, f.row, f.column)
        end = self.positions.offset(f.cell, f.end_row, f.end_column)
        if start is None or end is None:
            return (0, 0), (0, 0)
        return self.offset_position(start), self.offset_position(end)


def document_lines(text: str, path: str, encoding: str = UTF16) -> TextLines:
    """The position converter for a document: a notebook's JSON text, or source."""
    if path.endswith(".ipynb"):
        try:
            return NotebookLines(text, encoding, JsonPositions(text))
        except NotebookError:
            pass
    return TextLines(text, encoding)


def overlaps(a: Tuple[Tuple[int, int], Tuple[int, int]], b: Tuple[Tuple[int, int], Tuple[int, int]]) -> bool:
    """Do two LSP ranges touch (inclusive ends, so a cursor at either end counts)?"""
    return a[0] <= b[1] and b[0] <= a[1]


def fix_data(f: Finding) -> Dict[str, Any]:
    """The diagnostic's `data`, Ruff-style: the code and the fix (or null), with
    edits in torchlint's JSON shape (1-based rows and character columns)."""
    fix = None
    if f.fix is not None:
        fix = {
            "applicability": str(f.fix.applicability),
            "message": f.fix.message,
            "edits": [
                {
                    "content": e.content,
                    "location": {"row": e.row, "column": e.column},
                    "end_location": {"row": e.end_row, "column": e.end_column},
                }
                for e in f.fix.edits
            ],
        }
    data: Dict[str, Any] = {"code": f.code, "fix": fix, "noqa_row": f.noqa_row}
    if f.cell is not None:  # a notebook's finding: rows (and the fix's edits) are relative to this cell
        data["cell"] = f.cell
    return data


class Tag(IntEnum):
    """LSP's DiagnosticTag values."""

    UNNECESSARY = 1  # shown faded: code that does nothing
    DEPRECATED = 2  # shown struck through


# Where a tag fits: a discarded `.to()`/`.cuda()` statement has no effect;
# `torch.autograd.profiler` is the legacy profiler.
_TAGS: Dict[str, Tuple[Tag, ...]] = {"TL105": (Tag.UNNECESSARY,), "TL501": (Tag.DEPRECATED,)}


def diagnostic_tags(code: str) -> Tuple[Tag, ...]:
    return _TAGS.get(code, ())


def kind_wanted(kind: str, only: Optional[Sequence[str]]) -> bool:
    """LSP's `only` filter: a kind is wanted when a requested kind is it or a
    parent of it in the dot hierarchy ("source" covers "source.fixAll.torchlint")."""
    if not only:
        return True
    return any(kind == k or kind.startswith(k + ".") for k in only)


@dataclass(frozen=True)
class ClientSettings:
    """Editor settings; they act like the CLI's options over pyproject.toml."""

    select: Optional[Tuple[str, ...]] = None
    extend_select: Tuple[str, ...] = ()
    ignore: Tuple[str, ...] = ()
    unsafe_fixes: bool = True
    fix_all: bool = True  # offer source.fixAll.torchlint
    # None: the project's `preview` (or TORCHLINT_PREVIEW) decides.
    preview: Optional[bool] = None


_KEYS = {
    "preview": "preview",
    "select": "select",
    "ignore": "ignore",
    "extendSelect": "extend_select",
    "extend-select": "extend_select",
    "extend_select": "extend_select",
    "unsafeFixes": "unsafe_fixes",
    "unsafe-fixes": "unsafe_fixes",
    "unsafe_fixes": "unsafe_fixes",
    "fixAll": "fix_all",
    "fix-all": "fix_all",
    "fix_all": "fix_all",
}
_BOOLEANS = ("unsafe_fixes", "fix_all", "preview")


def settings_section(raw: Any) -> Optional[Mapping[str, Any]]:
    """The torchlint settings inside what a client sent: `{"torchlint": {...}}`,
    `{"settings": {...}}` (Ruff's initializationOptions shape) or the flat table."""
    if not isinstance(raw, Mapping):
        return None
    for key in ("torchlint", "settings"):
        inner = raw.get(key)
        if isinstance(inner, Mapping):
            return settings_section(inner) if key == "settings" else inner
    # A flat table counts only if it holds a torchlint key: another tool's
    # settings (`{"python": {...}}`) must not reset ours to the defaults.
    if raw and not any(key in _KEYS for key in raw):
        return None
    return raw


def parse_client_settings(raw: Any) -> Tuple[ClientSettings, List[str]]:
    """Client settings from a JSON value (keys left out take their defaults),
    and a message for each value ignored. Codes may be a list of strings or one
    comma-separated string."""
    section = settings_section(raw)
    values: Dict[str, Any] = {}
    errors: List[str] = []
    for key, value in (section or {}).items():
        field = _KEYS.get(key)
        if field is None or value is None:
            continue
        if field in _BOOLEANS:
            if isinstance(value, bool):
                values[field] = value
            else:
                errors.append(f"torchlint setting `{key}` must be true or false")
            continue
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            errors.append(f"torchlint setting `{key}` must be a list of rule codes")
            continue
        values[field] = tuple(v.strip() for v in value if v.strip())
    return ClientSettings(**values), errors
