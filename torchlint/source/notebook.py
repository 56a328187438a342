"""Jupyter notebooks: lint the code cells of an `.ipynb` as one logical module.

The code cells are concatenated (each ending with a newline) into one module,
so a device defined in cell 2 is known in cell 5. IPython syntax is blanked
out line for line, keeping the line count: a cell magic whose body is not
Python (`%%bash`, `%%writefile`, `%%html`) blanks the whole cell, one that
runs its body as Python (`%%time`, `%%timeit`, `%%capture`, `%%prun`,
`%%debug`, `%%python`, `%%python3`, `%%pypy`: Ruff's list) only its own
line, so the body is linted (it is often the training cell); line magics
(`%matplotlib inline`), shell escapes (`!pip install x`), captured ones
(`files = !ls`, `t = %timeit -o f()`) and help (`?torch.randn`,
`torch.randn?`) become a `pass` placeholder at the same indentation; a magic
line ending in a backslash continues on the next line (IPython joins them),
which gets a placeholder too. Placeholders are never handed back
to the user: fixes that touch them are dropped and the original lines are
restored when writing.

Findings carry `cell` (1-based position of the cell in the notebook, counting
markdown cells too, as Ruff does) and rows relative to that cell. A fix whose
edits span more than one cell is dropped.

`read(data)` gives the code cells as one module (`Cells`), which the pipeline
lints and the fix loop edits like a .py file's text (torchlint/engine/pipeline.py,
torchlint/engine/fix_loop.py). Writing back (`Cells.to_bytes`) replaces only the
changed cells' `"source"` values in the original bytes, so outputs, metadata,
execution counts, key order, indentation and the trailing newline stay byte
for byte; `source` keeps its form (a list of lines or one string).
"""

from __future__ import annotations

import ast
import json
import re
from bisect import bisect_right
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from torchlint.findings import Edit, Finding, Fix
from torchlint.source.edits import apply_fix_groups, unified_diff

_MAGIC_MARK = "# torchlint-ipython-"
_PLACEHOLDER_RE = re.compile(r"^([ \t]*)pass  " + re.escape(_MAGIC_MARK) + r"(\d+)$")
# `%time train(model)`: a line magic that runs its statement in the notebook's namespace.
_RUNNING_MAGIC_RE = re.compile(r"^([ \t]*)(%time[ \t]+)(?=[^-\s])")
# ... kept as `pass; train(model)  # torchlint-ipython-N`, the statement at its own columns.
_KEPT_RE = re.compile(r"^([ \t]*)pass;( *)(.*)  " + re.escape(_MAGIC_MARK) + r"(\d+)$")
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
    kept: Dict[int, str] = field(default_factory=dict)  # kept statement's id -> its magic (`%time `)
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


# Cell magics whose body is Python that runs in the notebook's namespace (or,
# for `%%python`/`%%pypy`, a Python interpreter): the same list as Ruff's.
# The body is linted; only the `%%` line is blanked.
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})


def cell_magic(line: str) -> Optional[str]:
    """The name of the cell magic `line` starts (`%%time -n 1` -> "time"), else None."""
    stripped = line.strip()
    if not stripped.startswith("%%"):
        return None
    parts = stripped[2:].split(None, 1)
    return parts[0] if parts else ""


def _transform(source: str, number: int, counter: List[int]) -> _Cell:
    """Blank out IPython syntax in one code cell, line for line."""
    lines = source.splitlines(keepends=True)
    cell = _Cell(number, "", source.endswith("\n") or source == "", False, original_source=source)
    first = next((ln for ln in lines if ln.strip()), "")
    magic = cell_magic(first)
    # A cell magic whose body is not Python (`%%bash`, `%%writefile`) blanks
    # the whole cell; one that runs its body as Python (`%%time`) only its line.
    whole_cell = magic is not None and magic not in PYTHON_CELL_MAGICS
    out = []
    state = _LineState()
    magic_indent: Optional[str] = None  # inside a magic continued with `\`: its indentation
    for line in lines:
        body = line.rstrip("\r\n")
        starts_magic = magic_indent is None and state.at_statement_start() and (whole_cell or _is_magic_line(body))
        if starts_magic or magic_indent is not None:
            counter[0] += 1
            ident = counter[0]
            if starts_magic:
                magic_indent = "" if whole_cell else body[: len(body) - len(body.lstrip())]
            cell.originals[ident] = body
            kept = _kept_statement(body) if starts_magic and not whole_cell else None
            if kept is not None:
                indent, magic, statement = kept
                cell.kept[ident] = magic
                out.append(f"{indent}pass;{' ' * (len(magic) - 5)}{statement}  {_MAGIC_MARK}{ident}\n")
                magic_indent = None
                continue
            out.append(f"{magic_indent}pass  {_MAGIC_MARK}{ident}\n")
            # IPython joins a line ending in `\` with the next one: that line
            # belongs to the magic too (`!pip install a \` / `    b`).
            if whole_cell or not body.endswith("\\"):
                magic_indent = None
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


def _kept_statement(body: str) -> Optional[Tuple[str, str, str]]:
    """(indentation, magic, statement) for `%time <statement>` on one line
    whose statement is Python: it runs in the notebook's namespace, so it is
    linted (a training call is often timed so)."""
    m = _RUNNING_MAGIC_RE.match(body)
    if m is None or body.endswith("\\") or _MAGIC_MARK in body:
        return None
    statement = body[m.end() :]
    try:
        ast.parse(statement)
    except (SyntaxError, ValueError):
        return None
    return m.group(1), m.group(2), statement


def _restore(text: str, cell: _Cell) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        end = "\n" if line.endswith("\n") else ""
        m = _PLACEHOLDER_RE.match(line.rstrip("\r\n"))
        if m and int(m.group(2)) in cell.originals:
            out.append(cell.originals[int(m.group(2))] + end)
            continue
        k = _KEPT_RE.match(line.rstrip("\r\n"))
        if k and int(k.group(4)) in cell.kept:
            out.append(f"{k.group(1)}{cell.kept[int(k.group(4))]}{k.group(3)}{end}")  # its magic back
        else:
            out.append(line)
    restored = "".join(out)
    if not cell.ends_with_newline and restored.endswith("\n"):
        restored = restored[:-1]
    return restored


class NotebookError(ValueError):
    """A file that is not a readable Jupyter notebook; the message says why."""


@dataclass(frozen=True)
class _File:
    """The notebook file as read: its JSON text and whether it had a UTF-8 BOM."""

    text: str
    bom: bool


class Cells:
    """A notebook's code cells as one module: the `Document` the fix loop edits
    (torchlint/engine/fix_loop.py), and the way back to cells and to the file."""

    def __init__(self, cells: Sequence[_Cell], file: _File) -> None:
        self.cells = list(cells)
        self.file = file
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
        # Module rows of IPython placeholders, per cell, cell-relative.
        self._holes = [
            [k + 1 for k, ln in enumerate(c.text.splitlines()) if _PLACEHOLDER_RE.match(ln)] for c in self.cells
        ]
        # Cells that have lines, and where they start, for `locate`.
        self._nonempty = [i for i, n in enumerate(self.lengths) if n]
        self._nonempty_starts = [self.starts[i] for i in self._nonempty]

    @cached_property
    def displayed_rows(self) -> FrozenSet[int]:
        """Module rows where a cell's last statement starts when IPython displays
        its value: a bare expression not ended by `;` (IPython lines excluded)."""
        rows = set()
        for i, c in enumerate(self.cells):
            try:
                tree = ast.parse(c.text)
            except (SyntaxError, ValueError):
                continue
            last = tree.body[-1] if tree.body else None
            if not isinstance(last, ast.Expr):
                continue
            lines = c.text.splitlines()
            end = lines[(last.end_lineno or last.lineno) - 1] if lines else ""
            code_end = end[: last.end_col_offset] if last.end_col_offset is not None else end
            rest = end[len(code_end) :].split("#", 1)[0]
            if rest.strip().startswith(";"):
                continue  # `x;` hides the output
            rows.add(self.starts[i] + last.lineno - 1)
        return frozenset(rows)

    @property
    def cell_rows(self) -> Tuple[int, ...]:
        """Module rows where each code cell that has lines starts, in order."""
        return tuple(self._nonempty_starts)

    def locate(self, row: int) -> Tuple[int, int]:
        """Module row -> (index into self.cells, 1-based row in the cell)."""
        k = bisect_right(self._nonempty_starts, row) - 1
        if k < 0:
            return 0, row
        i = self._nonempty[k]
        return i, row - self.starts[i] + 1

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
            if any(r0 <= h <= r1 for h in self._holes[i]):
                return None
            where = i
        return where

    def to_cell_edits(self, i: int, edits: Sequence[Edit]) -> Tuple[Edit, ...]:
        off = self.starts[i] - 1
        return tuple(replace(e, row=e.row - off, end_row=e.end_row - off) for e in edits)

    # -- the fix loop's Document ---------------------------------------------------------

    def edits_of(self, finding: Finding) -> Optional[Tuple[Edit, ...]]:
        """A fix applies only within one cell and away from IPython lines."""
        if finding.fix is None or self.edits_cell(finding.fix.edits) is None:
            return None
        return finding.fix.edits

    def apply(self, fixes: Sequence[Tuple[Edit, ...]]) -> Tuple["Cells", int]:
        per_cell: Dict[int, List[Tuple[Edit, ...]]] = {}
        for edits in fixes:
            i = self.edits_cell(edits)
            if i is not None:
                per_cell.setdefault(i, []).append(self.to_cell_edits(i, edits))
        new_cells = list(self.cells)
        applied = 0
        for i, groups in sorted(per_cell.items()):
            new_text, n = apply_fix_groups(self.cells[i].text, groups)
            applied += n
            if new_text != self.cells[i].text:
                if not new_text.endswith("\n"):
                    new_text += "\n"
                new_cells[i] = replace(self.cells[i], text=new_text)
        return Cells(new_cells, self.file), applied

    # -- back to cells and to the file -----------------------------------------------------

    def to_cell(self, f: Finding) -> Finding:
        """A module finding with its cell number and cell-relative rows; its fix
        is kept only if it lies within that one cell."""
        i, row = self.locate(f.row)
        j, end_row = self.locate(max(f.end_row, f.row))
        if j != i:  # a node running into the next cell: end at the end of this cell
            end_row, end_col = self.lengths[i] + 1, 1
        else:
            end_col = f.end_column
        fix = f.fix
        if fix is not None:
            where = self.edits_cell(fix.edits)
            fix = None if where != i else Fix(fix.applicability, fix.message, self.to_cell_edits(i, fix.edits))
        return replace(
            f,
            row=row,
            end_row=end_row,
            end_column=end_col,
            cell=self.cells[i].number,
            fix=fix,
            noqa_row=row if f.noqa_row is not None else None,
        )

    def lines_for(self, findings: Sequence[Finding]) -> Tuple[Tuple[Optional[int], int, str], ...]:
        """The cell lines (as the user wrote them: IPython lines restored) that
        cell findings point at: ((cell, row, text), ...), for code frames."""
        by_number = {c.number: c for c in self.cells}
        wanted = sorted(
            {
                (f.cell, row)
                for f in findings
                if f.cell is not None
                for row in (f.row, f.end_row, *(r for e in (f.fix.edits if f.fix else ()) for r in (e.row, e.end_row)))
            }
        )
        split: Dict[int, List[str]] = {}
        out = []
        for number, row in wanted:
            cell = by_number.get(number)
            if cell is None:
                continue
            if number not in split:
                split[number] = _restore(cell.text, cell).splitlines()
            lines = split[number]
            if 0 < row <= len(lines):
                out.append((number, row, lines[row - 1]))
        return tuple(out)

    def to_bytes(self) -> Optional[bytes]:
        """The notebook file with the changed cells' sources replaced (IPython
        lines restored), or None when no cell changed."""
        sources = {}
        for c in self.cells:
            restored = _restore(c.text, c)
            if restored != c.original_source:
                sources[c.number] = (restored, c.as_list)
        if not sources:
            return None
        new_text = replace_sources(self.file.text, sources)
        return (b"\xef\xbb\xbf" if self.file.bom else b"") + new_text.encode("utf-8")


def read(data: bytes) -> Optional[Cells]:
    """A notebook's code cells, or None when there is nothing to lint (not a
    Python notebook, or no code cells). Raises NotebookError with a reason."""
    text, nb, bom = _read(data)
    if not _is_python(nb):
        return None
    cells = _cells(nb)
    return Cells(cells, _File(text, bom)) if cells else None


def cell_diff(path: str, old: bytes, new: bytes) -> str:
    """`--diff` of a notebook as Ruff prints it: for each code cell whose
    source changed, a unified diff of that source headed `path:cell N` (N
    counts every cell, 1-based), no `No newline at end of file` marks (a
    cell's last line rarely has one), a blank line between two cells' diffs
    and after the notebook's last one. Empty when no cell changed."""
    _, a, _ = _read(old)
    _, b, _ = _read(new)
    out = []
    for number, (x, y) in enumerate(zip(a["cells"], b["cells"]), 1):
        if x.get("cell_type") != "code" or y.get("cell_type") != "code":
            continue
        before, after = _source_text(x), _source_text(y)
        if before != after:
            label = f"{path}:cell {number}"  # Ruff's header: no patch applies it
            out.append(unified_diff(path, before, after, newline_hint=False, label=label))
    return "\n".join(out) + "\n" if out else ""


def _source_text(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _read(data: bytes):
    """(text, notebook dict, bom) or raise NotebookError with a reason."""
    bom = data.startswith(b"\xef\xbb\xbf")
    try:
        text = data[3:].decode("utf-8") if bom else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not UTF-8: {exc}") from None
    try:
        nb = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NotebookError(f"invalid JSON: {exc}") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no top-level 'cells' list; nbformat 4 is required)")
    for k, cell in enumerate(nb["cells"], 1):
        if not isinstance(cell, dict) or "cell_type" not in cell:
            raise NotebookError(f"cell {k} is not a notebook cell")
        src = cell.get("source", "")
        if not (isinstance(src, str) or (isinstance(src, list) and all(isinstance(s, str) for s in src))):
            raise NotebookError(f"cell {k} has a 'source' that is neither a string nor a list of strings")
    return text, nb, bom


def _is_python(nb: dict) -> bool:
    meta = nb.get("metadata") or {}
    lang = (meta.get("language_info") or {}).get("name") or (meta.get("kernelspec") or {}).get("language") or "python"
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


# ---------------------------------------------------------------------------
# Byte-preserving JSON editing


_decoder = json.JSONDecoder()


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t\n\r":
        i += 1
    return i


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
    ensure_ascii = (
        text.isascii() and "\\u" in text and bool(re.search(r"\\u(00[89a-fA-F]|0[1-9a-fA-F]|[1-9a-fA-F])", text))
    )
    unit = _indent_unit(text)
    out = []
    pos = 0
    for number in sorted(sources):
        if number not in spans:
            raise ValueError(f"cell {number} has no 'source'")
        start, end = spans[number]
        line_start = text.rfind("\n", 0, start) + 1
        before = text[line_start:start]
        indent = before[: len(before) - len(before.lstrip(" \t"))]
        new, as_list = sources[number]
        out.append(text[pos:start])
        out.append(_dump_source(new, as_list, text[start:end], ensure_ascii, indent, unit))
        pos = end
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------
# Positions in the notebook's JSON text (an editor showing the .ipynb as text)

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class JsonPositions:
    """Where a cell-relative (row, column) of a finding lies in the notebook's
    JSON text: inside the string literal that holds that character of the
    cell's "source". Raises NotebookError for text that is not a notebook."""

    def __init__(self, text: str) -> None:
        try:
            spans = _source_spans(text)
        except (ValueError, IndexError) as exc:
            raise NotebookError(f"invalid JSON: {exc}") from None
        # cell number -> (offsets of each source character in `text`, the offset
        # just past the last one, the cell's line starts as character indices)
        self._cells: Dict[int, Tuple[List[int], int, List[int]]] = {}
        for number, (start, end) in spans.items():
            chars, offsets, tail = _literal_chars(text, start, end)
            source = "".join(chars)
            starts = [0]
            for line in source.splitlines(keepends=True):  # as `_transform` splits cells
                starts.append(starts[-1] + len(line))
            self._cells[number] = (offsets, tail, starts)

    def offset(self, cell: int, row: int, column: int) -> Optional[int]:
        """The offset in the JSON text of the cell's 1-based (row, column); None
        for a cell without a source."""
        found = self._cells.get(cell)
        if found is None:
            return None
        offsets, tail, starts = found
        row = max(1, min(row, len(starts)))
        index = starts[row - 1] + max(0, column - 1)
        return offsets[index] if index < len(offsets) else tail


def _literal_chars(text: str, start: int, end: int) -> Tuple[List[str], List[int], int]:
    """The characters of the JSON string (or list of strings) in text[start:end],
    each with its offset, and the offset of the closing quote of the last one."""
    chars: List[str] = []
    offsets: List[int] = []
    tail = start
    i = start
    while i < end:
        if text[i] != '"':
            i += 1
            continue
        i += 1
        while text[i] != '"':
            offsets.append(i)
            if text[i] != "\\":
                chars.append(text[i])
                i += 1
                continue
            kind = text[i + 1]
            if kind != "u":
                chars.append(_ESCAPES.get(kind, kind))
                i += 2
                continue
            code, width = int(text[i + 2 : i + 6], 16), 6
            if 0xD800 <= code < 0xDC00 and text[i + 6 : i + 8] == "\\u":  # a surrogate pair: one character
                low = int(text[i + 8 : i + 12], 16)
                if 0xDC00 <= low < 0xE000:
                    code, width = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00), 12
            chars.append(chr(code))
            i += width
        tail = i
        i += 1
    return chars, offsets, tail
