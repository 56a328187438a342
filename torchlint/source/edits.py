"""Text edits: derived from node replacements, diffed, applied to source."""

from __future__ import annotations

import difflib
import re
from bisect import bisect_left, bisect_right
from typing import Any, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from torchlint.findings import Edit

_NEWLINE = re.compile(r"\r\n|\r|\n")


class LineIndex:
    """Converts between absolute character offsets and 1-based (row, column)."""

    def __init__(self, text: str) -> None:
        self.text = text
        # Lines end at \r\n, \r or \n, as for Python and LibCST positions.
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def offset(self, row: int, column: int) -> int:
        row = max(1, min(row, len(self.starts)))
        return min(self.starts[row - 1] + column - 1, len(self.text))

    def position(self, offset: int) -> Tuple[int, int]:
        row = bisect_right(self.starts, offset)
        return row, offset - self.starts[row - 1] + 1


def diff_edits(old: str, new: str) -> Tuple[Edit, ...]:
    """The smallest set of line-grouped edits that turns `old` into `new`."""
    if old == new:
        return ()
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    index = LineIndex(old)
    line_offsets = [0]
    for line in old_lines:
        line_offsets.append(line_offsets[-1] + len(line))
    edits: List[Edit] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        start, end = line_offsets[i1], line_offsets[i2]
        before, after = old[start:end], "".join(new_lines[j1:j2])
        # Trim what the two chunks share at either end, to keep edits small.
        p = 0
        while p < min(len(before), len(after)) and before[p] == after[p]:
            p += 1
        s = 0
        while s < min(len(before), len(after)) - p and before[-1 - s] == after[-1 - s]:
            s += 1
        a, b = start + p, end - s
        content = after[p : len(after) - s]
        row, col = index.position(a)
        end_row, end_col = index.position(b)
        edits.append(Edit(row, col, end_row, end_col, content))
    return tuple(edits)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix (halving slices: C-speed compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def common_suffix(a: str, b: str, limit: int) -> int:
    lo, hi = 0, limit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[len(a) - mid : len(a) - lo] == b[len(b) - mid : len(b) - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def unified_diff(path: str, old: str, new: str, newline_hint: bool = True, label: Optional[str] = None) -> str:
    """`old` -> `new` as a unified diff of `path` (`--diff`). A name with
    whitespace is followed by a tab in the `---`/`+++` headers, the unified
    diff convention (GNU diff writes the date there) by which `patch` finds
    where the name ends; `label` replaces the header's name as it is.
    `newline_hint`: mark a last line without a line break with
    `\\ No newline at end of file` (else the line just ends)."""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    label = diff_label(path) if label is None else label
    out = []
    for line in difflib.unified_diff(old_lines, new_lines, fromfile=label, tofile=label):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + ("\n\\ No newline at end of file\n" if newline_hint else "\n"))
    return "".join(out)


def diff_label(name: str) -> str:
    """A file name as a unified diff's header shows it: a tab after a name
    that holds whitespace, so that the name ends there."""
    return name + "\t" if any(c.isspace() for c in name) else name


def apply_edits(text: str, edits: Iterable[Edit]) -> Tuple[str, int]:
    """Apply non-overlapping edits (later overlapping ones are skipped).
    Returns the new text and how many edits were applied."""
    index = LineIndex(text)
    spans = sorted(((index.offset(e.row, e.column), index.offset(e.end_row, e.end_column), e.content) for e in edits))
    out: List[str] = []
    pos = 0
    applied = 0
    for start, end, content in spans:
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(content)
        pos = end
        applied += 1
    out.append(text[pos:])
    return "".join(out), applied


def apply_fix_groups(text: str, groups: Sequence[Sequence[Edit]]) -> Tuple[str, int]:
    """Apply whole fixes (each a group of edits) that don't overlap an earlier one.
    A fix is applied entirely or not at all. Returns (text, fixes applied).

    A fix identical to edits already applied (two findings with the same fix)
    counts as applied without being applied twice, as in Ruff: the count is of
    findings fixed, not of edits made."""
    index = LineIndex(text)
    taken = _Taken()
    chosen: List[Edit] = []
    done: Set[Edit] = set()
    count = 0
    for group in groups:
        if group and all(e in done for e in group):
            count += 1
            continue
        spans = [(index.offset(e.row, e.column), index.offset(e.end_row, e.end_column)) for e in group]
        if any(taken.overlaps(start, end) for start, end in spans):
            continue
        for start, end in spans:
            taken.add(start, end)
        chosen.extend(group)
        done.update(group)
        count += 1
    new, _ = apply_edits(text, chosen)
    return new, count


def _overlaps(a: Tuple[int, int], b: Tuple[int, int]) -> bool:
    # Two insertions at the same point, or ranges that share any character.
    return a[0] == b[0] or (a[0] < b[1] and b[0] < a[1])


class _Taken:
    """The spans of the fixes chosen so far, answering "does this span overlap
    one of them?" (`_overlaps`) in logarithmic time: chosen spans do not overlap
    each other, so sorted by start they are sorted by end too, and the only
    candidates are the one starting at the same point and the first one ending
    after the new span starts. A file's thousands of fixes cost n log n, not n².
    Spans of one fix that overlap each other (never built by torchlint) switch
    to comparing with every span, as before."""

    def __init__(self) -> None:
        self.starts: List[int] = []
        self.ends: List[int] = []
        self.irregular: Optional[List[Tuple[int, int]]] = None

    def overlaps(self, start: int, end: int) -> bool:
        if self.irregular is not None:
            return any(_overlaps((start, end), t) for t in self.irregular)
        i = bisect_left(self.starts, start)
        if i < len(self.starts) and self.starts[i] == start:
            return True
        j = bisect_right(self.ends, start)
        return j < len(self.starts) and self.starts[j] < end

    def add(self, start: int, end: int) -> None:
        if self.irregular is None and self.overlaps(start, end):
            self.irregular = list(zip(self.starts, self.ends))
        if self.irregular is not None:
            self.irregular.append((start, end))
            return
        i = bisect_left(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, end)


def replace_nodes(module, mapping: Mapping[Any, Any]):
    """`module` with each node in `mapping` (by identity) replaced by its value."""
    import libcst as cst  # here, not at import: text edits alone need no LibCST

    class _Replacer(cst.CSTTransformer):
        def __init__(self) -> None:
            self.mapping = {id(k): v for k, v in mapping.items()}

        def on_leave(self, original_node, updated_node):
            replacement = self.mapping.get(id(original_node))
            return replacement if replacement is not None else updated_node

    return module.visit(_Replacer())
