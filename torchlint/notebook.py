"""Jupyter notebooks: lint the code cells of an `.ipynb` as one logical module.

The code cells are concatenated (each ending with a newline) into one module,
so a device defined in cell 2 is known in cell 5. IPython syntax is blanked
out line for line, keeping the line count: a cell magic (`%%time`, `%%bash`)
blanks the whole cell; line magics (`%matplotlib inline`), shell escapes
(`!pip install x`), captured ones (`files = !ls`, `t = %timeit -o f()`) and
help (`?torch.randn`, `torch.randn?`) become a `pass` placeholder at the same
indentation. Placeholders are never handed back to the user: fixes that touch
them are dropped and the original lines are restored when writing.

Findings carry `cell` (1-based position of the cell in the notebook, counting
markdown cells too, as Ruff does) and rows relative to that cell. A fix whose
edits span more than one cell is dropped.

Writing back (`fix=True`) replaces only the changed cells' `"source"` values in
the original bytes, so outputs, metadata, execution counts, key order,
indentation and the trailing newline stay byte for byte; `source` keeps its
form (a list of lines or one string).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from torchlint.findings import Edit, Finding, Fix, Problem

MAX_FIX_PASSES = 10
_MAGIC_MARK = "# torchlint-ipython-"
_PLACEHOLDER_RE = re.compile(r"^([ \t]*)pass  " + re.escape(_MAGIC_MARK) + r"(\d+)$")
# `x = !ls`, `a, b = %sx ls`, `self.out = !cmd`
_ASSIGN_MAGIC_RE = re.compile(r"^[ \t]*[A-Za-z_][\w.]*([ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*[!%]")
# `obj?`, `obj.attr??` (help); only a bare dotted name, so `x = a if b else c` is untouched.
_HELP_SUFFIX_RE = re.compile(r"^[ \t]*[A-Za-z_][\w.]*(\(\))?[ \t]*\?\??[ \t]*$")


@dataclass
class _Cell:
    number: int  # 1-based position among all cells
    text: str  # the transformed text, ending with "\n" when not empty
    ends_with_newline: bool  # the original source did
    as_list: bool  # "source" was a list of lines
    originals: Dict[int, str] = field(default_factory=dict)  # placeholder id -> original line
    original_source: str = ""


def _is_magic_line(line: str) -> bool:
    stripped = line.lstrip()
    if not stripped or stripped.startswith("#"):
        return False
    if stripped[0] in "%!?":
        return True
    if _ASSIGN_MAGIC_RE.match(line):
        return True
    return bool(_HELP_SUFFIX_RE.match(line))


def _transform(source: str, number: int, counter: List[int]) -> _Cell:
    """Blank out IPython syntax in one code cell, line for line."""
    lines = source.splitlines(keepends=True)
    cell = _Cell(number, "", source.endswith("\n") or source == "", False, original_source=source)
    first = next((ln for ln in lines if ln.strip()), "")
    whole_cell = first.lstrip().startswith("%%")
    out = []
    state = _LineState()
    for line in lines:
        body = line.rstrip("\r\n")
        if state.at_statement_start() and (whole_cell or _is_magic_line(body)):
            counter[0] += 1
            ident = counter[0]
            indent = "" if whole_cell else body[: len(body) - len(body.lstrip())]
            cell.originals[ident] = body
            out.append(f"{indent}pass  {_MAGIC_MARK}{ident}\n")
            continue
        out.append(body + "\n")
        state.feed(body)
    cell.text = "".join(out)
    return cell


class _LineState:
    """Rough lexical state between lines: inside a triple-quoted string, inside
    brackets, or after a backslash continuation. Magic-looking lines there
    (`%` as an operator, `!=` on a continued line, text in a docstring) are code."""

    def __init__(self) -> None:
        self.string: Optional[str] = None
        self.depth = 0
        self.continued = False

    def at_statement_start(self) -> bool:
        return self.string is None and self.depth <= 0 and not self.continued

    def feed(self, line: str) -> None:
        i, n = 0, len(line)
        self.continued = False
        while i < n:
            if self.string is not None:
                j = line.find(self.string, i)
                if j < 0:
                    return
                i = j + 3
                self.string = None
                continue
            ch = line[i]
            if ch == "#":
                return
            if line.startswith('"""', i) or line.startswith("'''", i):
                self.string = line[i : i + 3]
                i += 3
                continue
            if ch in "\"'":
                j = i + 1
                while j < n and line[j] != ch:
                    j += 2 if line[j] == "\\" else 1
                i = j + 1
                continue
            if ch in "([{":
                self.depth += 1
            elif ch in ")]}":
                self.depth = max(0, self.depth - 1)
            elif ch == "\\" and i == n - 1:
                self.continued = True
            i += 1


def _restore(text: str, cell: _Cell) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        m = _PLACEHOLDER_RE.match(line.rstrip("\r\n"))
        if m and int(m.group(2)) in cell.originals:
            out.append(cell.originals[int(m.group(2))] + ("\n" if line.endswith("\n") else ""))
        else:
            out.append(line)
    restored = "".join(out)
    if not cell.ends_with_newline and restored.endswith("\n"):
        restored = restored[:-1]
    return restored


class _Layout:
    """Where each code cell sits in the concatenated module."""

    def __init__(self, cells: Sequence[_Cell]):
        self.cells = list(cells)
        self.starts: List[int] = []  # 1-based module row of each cell's first line
        self.lengths: List[int] = []
        row = 1
        for c in self.cells:
            self.starts.append(row)
            n = c.text.count("\n")
            self.lengths.append(n)
            row += n
        self.total = row - 1
        self.source = "".join(c.text for c in self.cells)

    def locate(self, row: int) -> Tuple[int, int]:
        """Module row -> (index into self.cells, 1-based row in the cell)."""
        for i in range(len(self.cells) - 1, -1, -1):
            if self.lengths[i] and row >= self.starts[i]:
                return i, row - self.starts[i] + 1
        return 0, row

    def placeholder_rows(self, i: int) -> List[int]:
        return [k + 1 for k, ln in enumerate(self.cells[i].text.splitlines()) if _PLACEHOLDER_RE.match(ln)]

    def edits_cell(self, edits: Sequence[Edit]) -> Optional[int]:
        """The one cell all `edits` lie in, away from placeholders; None otherwise."""
        where = None
        for e in edits:
            last = e.end_row - 1 if (e.end_column == 1 and e.end_row > e.row) else e.end_row
            i, r0 = self.locate(e.row)
            j, r1 = self.locate(max(last, e.row))
            if i != j or (where is not None and where != i):
                return None
            if e.row > self.starts[i] + self.lengths[i]:
                return None
            holes = self.placeholder_rows(i)
            if any(r0 <= h <= r1 for h in holes):
                return None
            where = i
        return where

    def to_cell_edits(self, i: int, edits: Sequence[Edit]) -> Tuple[Edit, ...]:
        off = self.starts[i] - 1
        return tuple(replace(e, row=e.row - off, end_row=e.end_row - off) for e in edits)


def _notebook_finding(path: str, message: str) -> Finding:
    from torchlint.engine import syntax_error_finding

    return syntax_error_finding(path, message)


def _read(data: bytes, path: str):
    """(text, notebook dict, bom) or raise ValueError with a reason."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data[3:].decode("utf-8") if bom else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8: {exc}") from None
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("not a Jupyter notebook (no top-level 'cells' list; nbformat 4 is required)")
    for k, cell in enumerate(nb["cells"], 1):
        if not isinstance(cell, dict) or "cell_type" not in cell:
            raise ValueError(f"cell {k} is not a notebook cell")
        src = cell.get("source", "")
        if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(s, str) for s in src))):
            raise ValueError(f"cell {k} has a 'source' that is neither a string nor a list of strings")
    return text, nb, bom


def _is_python(nb: dict) -> bool:
    meta = nb.get("metadata") or {}
    lang = ((meta.get("language_info") or {}).get("name") or (meta.get("kernelspec") or {}).get("language") or "python")
    return str(lang).lower() in ("python", "python3", "ipython", "ipython3")


def _cells(nb: dict) -> List[_Cell]:
    counter = [0]
    out = []
    for k, raw in enumerate(nb["cells"], 1):
        if raw.get("cell_type") != "code":
            continue
        src = raw.get("source", "")
        as_list = isinstance(src, list)
        text = "".join(src) if as_list else src
        cell = _transform(text, k, counter)
        cell.as_list = as_list
        out.append(cell)
    return out


def _map_finding(f: Finding, layout: _Layout) -> Finding:
    i, row = layout.locate(f.row)
    j, end_row = layout.locate(max(f.end_row, f.row))
    if j != i:  # a node running into the next cell: end at the end of this cell
        end_row, end_col = layout.lengths[i] + 1, 1
    else:
        end_col = f.end_column
    fix = f.fix
    if fix is not None:
        where = layout.edits_cell(fix.edits)
        fix = None if where != i else Fix(fix.applicability, fix.message, layout.to_cell_edits(i, fix.edits))
    return replace(
        f,
        row=row,
        end_row=end_row,
        end_column=end_col,
        cell=layout.cells[i].number,
        fix=fix,
        noqa_row=row if f.noqa_row is not None else None,
    )


@dataclass(frozen=True)
class NotebookResult:
    findings: Tuple[Finding, ...]
    new_bytes: Optional[bytes]  # the fixed file, when a fix changed something
    problems: Tuple[Problem, ...]
    fixes_applied: int = 0


def check_notebook(
    data: bytes, path: str, enabled: FrozenSet[str], fix: bool = False, unsafe: bool = False
) -> Tuple[List[Finding], Optional[bytes], List[Problem]]:
    """Lint (and with `fix`, fix) a notebook's code cells.

    Returns (findings with `cell` set and cell-relative rows, the new file bytes
    when a fix changed something else None, problems)."""
    r = notebook_result(data, path, enabled, fix, unsafe)
    return list(r.findings), r.new_bytes, list(r.problems)


def notebook_result(
    data: bytes, path: str, enabled: FrozenSet[str], fix: bool = False, unsafe: bool = False
) -> NotebookResult:
    """`check_notebook`, also counting the fixes applied (for "N fixed" summaries)."""
    from torchlint.engine import check_source, parse
    from torchlint.fixes import apply_fix_groups
    from torchlint.findings import Applicability

    try:
        text, nb, bom = _read(data, path)
    except ValueError as exc:
        return NotebookResult((_notebook_finding(path, f"cannot read notebook: {exc}"),), None, ())
    if not _is_python(nb):
        return NotebookResult((), None, ())
    cells = _cells(nb)
    if not cells:
        return NotebookResult((), None, ())
    layout = _Layout(cells)
    result = check_source(layout.source, path, enabled)
    problems: List[Problem] = list(result.problems)
    changed = False
    total = 0

    if fix and not any(f.code == "TL000" for f in result.findings):
        allowed = {Applicability.SAFE} | ({Applicability.UNSAFE} if unsafe else set())
        for _ in range(MAX_FIX_PASSES):
            per_cell: Dict[int, List[Tuple[Edit, ...]]] = {}
            for f in result.findings:
                if f.fix is None or f.fix.applicability not in allowed:
                    continue
                i = layout.edits_cell(f.fix.edits)
                if i is not None:
                    per_cell.setdefault(i, []).append(layout.to_cell_edits(i, f.fix.edits))
            if not per_cell:
                break
            new_cells = list(layout.cells)
            applied = 0
            for i, groups in sorted(per_cell.items()):
                new_text, n = apply_fix_groups(layout.cells[i].text, groups)
                if n and new_text != layout.cells[i].text:
                    if not new_text.endswith("\n"):
                        new_text += "\n"
                    new_cells[i] = replace(layout.cells[i], text=new_text)
                    applied += n
            if not applied:
                break
            candidate = _Layout(new_cells)
            try:
                parse(candidate.source)
            except Exception:
                problems.append(Problem(path, "a fix produced code that does not parse; it was not applied"))
                break
            layout = candidate
            changed = True
            total += applied
            result = check_source(layout.source, path, enabled)
            problems = [p for p in problems if p not in result.problems] + list(result.problems)

    findings = sorted((_map_finding(f, layout) for f in result.findings), key=Finding.sort_key)
    new_bytes = None
    if changed:
        sources = {}
        for c in layout.cells:
            restored = _restore(c.text, c)
            if restored != c.original_source:
                sources[c.number] = (restored, c.as_list)
        if sources:
            try:
                new_text = replace_sources(text, sources)
            except ValueError as exc:  # pragma: no cover - _read already validated the JSON
                problems.append(Problem(path, f"cannot write notebook: {exc}"))
            else:
                new_bytes = (b"\xef\xbb\xbf" if bom else b"") + new_text.encode("utf-8")
    return NotebookResult(tuple(findings), new_bytes, tuple(problems), total if new_bytes is not None else 0)


# ---------------------------------------------------------------------------
# Byte-preserving JSON editing


_WS = re.compile(r"[ \t\n\r]*")
_decoder = json.JSONDecoder()


def _skip_ws(s: str, i: int) -> int:
    return _WS.match(s, i).end()


def _source_spans(text: str) -> Dict[int, Tuple[int, int]]:
    """1-based cell number -> (start, end) offsets of that cell's "source" value."""
    scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
    spans: Dict[int, Tuple[int, int]] = {}
    i = _skip_ws(text, 0)
    if text[i : i + 1] != "{":
        raise ValueError("top level is not an object")
    i += 1
    while True:
        i = _skip_ws(text, i)
        if text[i] == "}":
            break
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
        key, i = scanstring(text, i + 1)
        i = _skip_ws(text, i)
        i = _skip_ws(text, i + 1)  # ':'
        if key != "cells":
            _, i = _decoder.raw_decode(text, i)
            continue
        if text[i] != "[":
            raise ValueError("'cells' is not a list")
        i += 1
        number = 0
        while True:
            i = _skip_ws(text, i)
            if text[i] == "]":
                i += 1
                break
            if text[i] == ",":
                i = _skip_ws(text, i + 1)
            number += 1
            if text[i] != "{":
                _, i = _decoder.raw_decode(text, i)
                continue
            i += 1
            while True:
                i = _skip_ws(text, i)
                if text[i] == "}":
                    i += 1
                    break
                if text[i] == ",":
                    i = _skip_ws(text, i + 1)
                ckey, i = scanstring(text, i + 1)
                i = _skip_ws(text, i)
                i = _skip_ws(text, i + 1)
                start = i
                _, i = _decoder.raw_decode(text, i)
                if ckey == "source":
                    spans[number] = (start, i)
    return spans


def _dump_source(new: str, as_list: bool, old_span: str, ensure_ascii: bool, key_indent: str, unit: str) -> str:
    if not as_list:
        return json.dumps(new, ensure_ascii=ensure_ascii)
    items = [json.dumps(s, ensure_ascii=ensure_ascii) for s in new.splitlines(keepends=True)]
    if not items:
        return "[]"
    nl = "\r\n" if "\r\n" in old_span else "\n"
    if "\n" not in old_span:
        if old_span.strip() == "[]" and unit:  # was empty: the file's layout, one level deeper than the key
            sep = "," + nl + key_indent + unit
            return "[" + nl + key_indent + unit + sep.join(items) + nl + key_indent + "]"
        return "[" + ", ".join(items) + "]"
    m = re.match(r"\[[ \t]*\r?\n([ \t]*)", old_span)
    item_indent = m.group(1) if m else key_indent + unit
    close = re.search(r"\n([ \t]*)\]$", old_span)
    close_indent = close.group(1) if close else key_indent
    return "[" + nl + ("," + nl).join(item_indent + it for it in items) + nl + close_indent + "]"


def _indent_unit(text: str) -> str:
    """The file's indentation step: the indentation of its first indented line."""
    m = re.search(r"\n([ \t]+)\S", text)
    return m.group(1) if m else ""


def replace_sources(text: str, sources: Dict[int, Tuple[str, bool]]) -> str:
    """Replace the "source" of the given cells (number -> (new source, as list)) in
    the notebook's JSON text, touching no other byte."""
    spans = _source_spans(text)
    ensure_ascii = text.isascii() and "\\u" in text and bool(re.search(r"\\u(00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", text))
    unit = _indent_unit(text)
    out = []
    pos = 0
    for number in sorted(sources):
        if number not in spans:
            raise ValueError(f"cell {number} has no 'source'")
        start, end = spans[number]
        line_start = text.rfind("\n", 0, start) + 1
        indent = re.match(r"[ \t]*", text[line_start:start]).group(0)
        new, as_list = sources[number]
        out.append(text[pos:start])
        out.append(_dump_source(new, as_list, text[start:end], ensure_ascii, indent, unit))
        pos = end
    out.append(text[pos:])
    return "".join(out)
