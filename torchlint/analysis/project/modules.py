"""Which file of the project a dotted import names, whatever folder the run
starts at.

Files are known by their absolute paths. A relative import is resolved by
path (`from .base import X` in `pkg/net.py` is `pkg/base.py` or
`pkg/base/__init__.py`), as Python does. An absolute import is matched
against the files by path suffix (`models.base` is any `.../models/base.py`
or `.../models/base/__init__.py`); among several matches:

1. those whose implied root (the folder the dotted name starts in) holds the
   importing file, as the script's own folder or one above it is on
   `sys.path`: the deepest such root wins (the nearest);
2. otherwise, the one whose root shares the longest path with the importing
   file's folder;

and a tie is ambiguous: the name stays unknown. In one folder a package
(`base/__init__.py`) wins over a module (`base.py`), as in Python.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union


class _Ambiguous:
    def __repr__(self) -> str:
        return "AMBIGUOUS"


AMBIGUOUS = _Ambiguous()
Found = Union[None, str, _Ambiguous]
Parts = Tuple[str, ...]


def path_parts(path: str) -> Parts:
    """The components of `path` made absolute and normalised."""
    full = os.path.normcase(os.path.normpath(os.path.abspath(path)))
    drive, rest = os.path.splitdrive(full)
    parts = tuple(p for p in rest.replace("\\", "/").split("/") if p)
    return ((drive,) if drive else ()) + parts


def module_parts(path: str) -> Optional[Tuple[Parts, bool]]:
    """(the dotted parts a file is importable as, relative to the filesystem
    root, whether it is a package's `__init__.py`); None for a file that is
    not a Python module (a notebook, `<stdin>`)."""
    parts = path_parts(path)
    if not parts or not parts[-1].endswith(".py"):
        return None
    if parts[-1] == "__init__.py":
        return parts[:-1], True
    return parts[:-1] + (parts[-1][:-3],), False


def _nearest_root(parts: Parts, roots: Sequence[str]) -> Optional[Parts]:
    best: Optional[Parts] = None
    for root in roots:
        r = path_parts(root)
        if os.path.isfile(root):
            r = r[:-1]
        if parts[: len(r)] == r and len(r) < len(parts) and (best is None or len(r) > len(best)):
            best = r
    return best


def module_name(path: str, roots: Sequence[str]) -> Optional[str]:
    """The dotted name of `path` relative to the nearest of the run's `roots`
    that holds it (`models/base.py` under root `.`: "models.base"); None
    outside every root or for a file that is not a module."""
    mod = module_parts(path)
    if mod is None:
        return None
    parts, _ = mod
    best = _nearest_root(parts, roots)
    return ".".join(parts[len(best) :]) if best is not None else None


def root_of(path: str, roots: Sequence[str]) -> Optional[Parts]:
    """The nearest of the run's `roots` that holds `path` (None: none does)."""
    return _nearest_root(path_parts(path), roots)


class ModuleTable:
    """The project's module files, looked up by relative or absolute import."""

    def __init__(self, paths: Iterable[str]) -> None:
        self._exact: Dict[Parts, List[Tuple[bool, str]]] = {}
        self._by_last: Dict[str, List[Parts]] = {}
        for path in paths:
            mod = module_parts(path)
            if mod is None:
                continue
            parts, package = mod
            entries = self._exact.setdefault(parts, [])
            if not entries and parts:
                self._by_last.setdefault(parts[-1], []).append(parts)
            entries.append((package, path))

    def exact(self, parts: Parts) -> Found:
        """The file importable as exactly `parts` (absolute): a package wins
        over a module of the same name."""
        entries = self._exact.get(parts)
        if not entries:
            return None
        packages = [p for is_pkg, p in entries if is_pkg]
        chosen = packages or [p for _, p in entries]
        return chosen[0] if len(chosen) == 1 else AMBIGUOUS

    def relative(self, importer: str, level: int, dotted: Sequence[str]) -> Found:
        """`from <level dots><dotted> import ...` in file `importer`."""
        base = path_parts(importer)[:-1]
        if level > 1:
            if level - 1 > len(base):
                return None
            base = base[: len(base) - (level - 1)]
        return self.exact(base + tuple(dotted))

    def absolute(self, importer: str, dotted: Sequence[str]) -> Found:
        """`import a.b` / `from a.b import ...` in file `importer`."""
        dotted = tuple(dotted)
        if not dotted:
            return None
        matches = [p for p in self._by_last.get(dotted[-1], ()) if p[len(p) - len(dotted) :] == dotted]
        if not matches:
            return None
        if len(matches) == 1:
            return self.exact(matches[0])
        here = path_parts(importer)[:-1]
        roots = [(m[: len(m) - len(dotted)], m) for m in matches]
        holding = [(r, m) for r, m in roots if here[: len(r)] == r]
        if holding:
            deepest = max(len(r) for r, _ in holding)
            best = [m for r, m in holding if len(r) == deepest]
        else:
            shared = [(_common(r, here), m) for r, m in roots]
            top = max(n for n, _ in shared)
            best = [m for n, m in shared if n == top]
        return self.exact(best[0]) if len(best) == 1 else AMBIGUOUS


def _common(a: Parts, b: Parts) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n
