"""Which files to lint: expand paths into a sorted list of `*.py` / `*.ipynb` files.

- Explicitly named files are always included (even if excluded), unless
  `force_exclude` is set, as in Ruff.
- Directories are walked recursively. Skipped: `.git`, `__pycache__`, any
  virtualenv (a folder holding `pyvenv.cfg`), paths matching `exclude` /
  `extend-exclude`, and paths ignored by `.gitignore` files.
- `.gitignore` files are honoured whether or not the tree is a git repository:
  every `.gitignore` in a walked folder applies below it, and those in the
  folders above a walked root apply too, up to the repository root (the
  nearest folder holding `.git`) when there is one. Deeper files override
  shallower ones, as in git.
- Symlinks are followed; a folder already visited (by its resolved path) is
  not walked again, so loops end. A file reached twice is listed once.
- Unreadable folders and missing paths become Problems, never exceptions.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, List, Optional, Set, Tuple

import pathspec

from torchlint.config import Settings
from torchlint.findings import Problem

SUFFIXES = (".py", ".ipynb")
ALWAYS_SKIP = frozenset({".git", "__pycache__"})

_Ignore = Tuple[str, pathspec.PathSpec]  # (folder the .gitignore is in, its patterns)


@dataclass(frozen=True)
class Discovered:
    files: Tuple[str, ...]
    problems: Tuple[Problem, ...]


def is_lintable(path: str) -> bool:
    return path.endswith(SUFFIXES)


def _read_gitignore(folder: str) -> Optional[_Ignore]:
    path = os.path.join(folder, ".gitignore")
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    return os.path.abspath(folder), pathspec.GitIgnoreSpec.from_lines(lines)


def _ancestor_ignores(folder: str) -> List[_Ignore]:
    """`.gitignore` files above `folder` (exclusive), up to the git root."""
    folder = os.path.abspath(folder)
    chain: List[str] = []
    current = folder
    while True:
        parent = os.path.dirname(current)
        if os.path.isdir(os.path.join(current, ".git")) or parent == current:
            break
        chain.append(parent)
        current = parent
    if not os.path.isdir(os.path.join(current, ".git")):
        return []  # not inside a git repository: only the walked tree's files count
    out = []
    for parent in reversed(chain):
        ignore = _read_gitignore(parent)
        if ignore:
            out.append(ignore)
    return out


def _gitignored(path: str, is_dir: bool, ignores: Iterable[_Ignore]) -> bool:
    abspath = os.path.abspath(path)
    verdict = False
    for base, spec in ignores:
        rel = os.path.relpath(abspath, base)
        if rel.startswith(".."):
            continue
        rel = rel.replace(os.sep, "/") + ("/" if is_dir else "")
        result = spec.check_file(rel)
        if result.include is not None:
            verdict = result.include
    return verdict


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Excluder:
    """`exclude` patterns for entries found under one walked argument.

    Patterns are matched against paths relative to the settings' root (the
    configuration's folder), so root-anchored patterns work. When the walked
    argument lies outside the root, or is itself excluded (the user named it
    explicitly), they are matched relative to the argument instead: folders
    above what the user asked for never exclude it (e.g. linting
    `.../site-packages/torch/nn` lints it, though `site-packages` is excluded).
    """

    def __init__(self, settings: Settings, arg: str) -> None:
        self.spec = settings.exclude_spec()
        root = os.path.abspath(settings.root)
        arg = os.path.abspath(arg)
        self.base = arg
        if _under(arg, root):
            rel = os.path.relpath(arg, root).replace(os.sep, "/")
            if rel == "." or not self.spec.match_file(rel + "/"):
                self.base = root

    def __call__(self, path: str, is_dir: bool) -> bool:
        rel = os.path.relpath(os.path.abspath(path), self.base).replace(os.sep, "/")
        return self.spec.match_file(rel + "/" if is_dir else rel)


class _Walker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.files: List[str] = []
        self.problems: List[Problem] = []
        self.seen_dirs: Set[str] = set()
        self.excluded: _Excluder = _Excluder(settings, ".")

    def walk(self, folder: str, ignores: List[_Ignore]) -> None:
        real = os.path.realpath(folder)
        if real in self.seen_dirs:
            return
        self.seen_dirs.add(real)
        own = _read_gitignore(folder)
        if own:
            ignores = ignores + [own]
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            self.problems.append(Problem(folder, f"cannot read directory: {exc.strerror or exc}"))
            return
        for entry in entries:
            path = os.path.normpath(os.path.join(folder, entry.name))
            try:
                is_dir = entry.is_dir()  # follows symlinks
                is_file = not is_dir and entry.is_file()
            except OSError:
                continue
            if is_dir:
                if entry.name in ALWAYS_SKIP or os.path.exists(os.path.join(path, "pyvenv.cfg")):
                    continue
                if self.excluded(path, True) or _gitignored(path, True, ignores):
                    continue
                self.walk(path, ignores)
            elif is_file and is_lintable(entry.name):
                if self.excluded(path, False) or _gitignored(path, False, ignores):
                    continue
                self.files.append(path)


def _excluded_file(path: str, settings: Settings) -> bool:
    folder = os.path.dirname(path) or "."
    ignores = _ancestor_ignores(folder)
    own = _read_gitignore(folder)
    if own:
        ignores.append(own)
    return settings.is_excluded(path) or _gitignored(path, False, ignores)


def discover(paths: Iterable[str], settings: Settings, force_exclude: bool = False) -> Discovered:
    """Expand `paths` into lintable files (sorted, unique) and problems."""
    walker = _Walker(settings)
    for raw in paths:
        path = os.path.normpath(raw)
        if os.path.isdir(path):
            walker.excluded = _Excluder(settings, path)
            walker.walk(path, _ancestor_ignores(path))
        elif os.path.isfile(path):
            if force_exclude and _excluded_file(path, settings):
                continue
            walker.files.append(path)
        elif os.path.lexists(path):
            walker.problems.append(Problem(path, "cannot read path (broken symlink or special file)"))
        else:
            walker.problems.append(Problem(path, "no such file or directory"))
    unique: List[str] = []
    seen: Set[str] = set()
    for path in sorted(walker.files):
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            unique.append(path)
    problems = sorted(set(walker.problems), key=lambda p: (p.path, p.message))
    return Discovered(tuple(unique), tuple(problems))
