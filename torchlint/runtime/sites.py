"""Which code is the user's, and where in it something happened.

A file is the user's when it lies under one of the run's roots (the script's
folder, or for `-m` the current folder) and not in an installed package (a
`site-packages` folder, the interpreter's own library, torchlint itself). A
notebook's cells are the user's: each cell's code is registered under the
name Python compiles it with, and maps back to (notebook, cell).

A site is a frame's current instruction: its line and columns from the code
object's positions (Python 3.11+; before that, the line and column 1).
"""

from __future__ import annotations

import ast
import linecache
import os
import sys
import sysconfig
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from torchlint.runtime.observations import Site

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # torchlint/


def _library_dirs() -> Tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        dirs.add(os.path.realpath(os.path.join(prefix, "lib")))
    dirs.add(os.path.realpath(_PACKAGE_DIR))
    return tuple(sorted(dirs))


@dataclass(frozen=True)
class Place:
    """Where a code object's file is: the file (or notebook) and its cell."""

    path: str
    cell: Optional[int] = None


class UserFiles:
    """Answers "is this file the user's?" by filename, cached."""

    def __init__(self, roots: Sequence[str]) -> None:
        self.roots = tuple(os.path.realpath(r) for r in roots)
        self._libraries = _library_dirs()
        self._cache: Dict[str, Optional[Place]] = {}

    def add_cell(self, filename: str, notebook: str, cell: int) -> None:
        """Code compiled under `filename` is cell `cell` of `notebook`."""
        self._cache[filename] = Place(notebook, cell)

    def place(self, filename: str) -> Optional[Place]:
        try:
            return self._cache[filename]
        except KeyError:
            pass
        found = self._judge(filename)
        self._cache[filename] = found
        return found

    def _judge(self, filename: str) -> Optional[Place]:
        if not filename or filename.startswith("<"):
            return None
        real = os.path.realpath(filename)
        parts = real.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return None
        if any(_under(real, lib) for lib in self._libraries):
            return None
        if any(_under(real, root) for root in self.roots):
            return Place(os.path.abspath(filename))
        return None

    def frames(self, frame: Optional[FrameType]) -> Iterator[FrameType]:
        """The user's frames from `frame` outwards."""
        while frame is not None:
            if self.place(frame.f_code.co_filename) is not None:
                yield frame
            frame = frame.f_back

    def innermost(self, frame: Optional[FrameType]) -> Optional[FrameType]:
        return next(self.frames(frame), None)


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


# A site is recorded cheaply as (code object, instruction offset) and turned
# into a Site only when reported.
Key = Tuple[CodeType, int]


def key_of(frame: FrameType) -> Key:
    return (frame.f_code, frame.f_lasti)


_POSITIONS: Dict[CodeType, List[Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]]] = {}


def _positions(code: CodeType, lasti: int) -> Tuple[Optional[int], Optional[int], Optional[int], Optional[int]]:
    table = _POSITIONS.get(code)
    if table is None:
        positions = getattr(code, "co_positions", None)
        table = list(positions()) if positions is not None else []
        _POSITIONS[code] = table
    index = lasti // 2
    if 0 <= index < len(table):
        return table[index]
    return (None, None, None, None)


def _line_of(code: CodeType, lasti: int) -> int:
    for start, end, line in code.co_lines():
        if start <= lasti < end and line is not None:
            return line
    return code.co_firstlineno


def _char_column(text: str, byte_offset: int) -> int:
    """A 0-based UTF-8 byte offset in `text` as a 1-based character column."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1


def site_at(key: Key, files: UserFiles) -> Site:
    """The Site of a recorded (code, offset)."""
    code, lasti = key
    place = files.place(code.co_filename) or Place(os.path.abspath(code.co_filename))
    line, end_line, col, end_col = _positions(code, lasti)
    if line is None:
        line = _line_of(code, lasti)
    text = linecache.getline(code.co_filename, line)
    column = _char_column(text, col) if col is not None else 1
    end_line = end_line or line
    if end_col is not None:
        end_text = text if end_line == line else linecache.getline(code.co_filename, end_line)
        end_column = _char_column(end_text, end_col)
    else:
        end_column = 0
    return Site(place.path, line, column, end_line, end_column, place.cell, code.co_name)


def source_line(site: Site, filename: Optional[str] = None) -> Optional[str]:
    """The text of a site's line, read as Python reads it (notebook cells: linecache)."""
    text = linecache.getline(filename or site.path, site.line)
    return text.rstrip("\n") if text else None


# -- where an accumulation is written (TL202) -----------------------------------------------------


def accumulation_line(code: CodeType, name: str) -> Optional[int]:
    """The line of the statement in `code`'s function that accumulates into
    `name` (`name += x`, `name = name + x`, `name.append(x)`), preferring one
    inside a loop; None when the source cannot be read or has none."""
    source = "".join(linecache.getlines(code.co_filename))
    if not source:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    scope: ast.AST = tree
    if code.co_name != "<module>":
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if first <= code.co_firstlineno <= node.lineno:
                    scope = node
                    break
    found: List[Tuple[bool, int]] = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            loop = in_loop or isinstance(child, (ast.For, ast.While, ast.AsyncFor))
            if _accumulates(child, name):
                found.append((not loop, getattr(child, "lineno", 0)))
            visit(child, loop)

    visit(scope, False)
    return min(found)[1] if found else None


def _accumulates(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
        return True
    if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value))
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return (
            isinstance(func, ast.Attribute)
            and func.attr in ("append", "extend", "insert")
            and isinstance(func.value, ast.Name)
            and func.value.id == name
        )
    return False
