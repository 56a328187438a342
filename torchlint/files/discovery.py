"""Which files to lint: expand paths into a sorted list of `*.py` / `*.ipynb` files.

- Paths named on the command line are always linted, files and folders
  alike, even if `exclude` or a `.gitignore` would skip them, unless
  `force_exclude` is set (then `exclude` applies to them too), as in Ruff.
- Directories are walked recursively. Skipped: `.git`, `__pycache__`, any
  virtualenv (a folder holding `pyvenv.cfg`), paths matching `exclude` /
  `extend-exclude`, and paths ignored by `.gitignore` files (unless
  `respect_gitignore` is off).
- `.gitignore` files are honoured whether or not the tree is a git repository:
  every `.gitignore` in a walked folder applies below it, and those in the
  folders above a walked root apply too, up to the repository root (the
  nearest folder holding `.git`) when there is one. Deeper files override
  shallower ones, as in git. Each entry found is matched by its own path
  (an ignored folder is not entered): the folder the user named, and the
  folders above it, are never tested, so naming an ignored folder lints it.
- Symlinks are followed; a folder already visited (by its resolved path) is
  not walked again, so loops end. A file reached twice is listed once.
- Unreadable folders, missing paths, symlink loops and special files (a FIFO,
  a socket, a device) named on the command line become Problems, never
  exceptions; special files are never opened. A folder found by the walk
  that is removed before it is read is skipped, as a broken link is.
"""

from __future__ import annotations

import errno
import os
import stat
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
    """Whether `.gitignore` patterns ignore `path` itself: the last pattern
    that matches its own path wins (deeper files after shallower ones). A
    pattern that matches only a folder above it does not count: walking never
    enters an ignored folder, and a folder the user named is linted."""
    abspath = os.path.abspath(path)
    verdict = False
    for base, spec in ignores:
        rel = os.path.relpath(abspath, base)
        if rel.startswith(".."):
            continue
        rel = rel.replace(os.sep, "/") + ("/" if is_dir else "")
        for pattern in spec.patterns:
            if pattern.include is None or pattern.regex is None:
                continue
            if pattern.regex.fullmatch(rel) is not None:
                verdict = pattern.include
    return verdict


def _gitignored_here(path: str, is_dir: bool, ignores: Iterable[_Ignore]) -> bool:
    """Whether `path` is ignored, itself or through a folder above it (git's
    view of a path it did not walk to)."""
    abspath = os.path.abspath(path)
    verdict = False
    for base, spec in ignores:
        rel = os.path.relpath(abspath, base)
        if rel.startswith(".."):
            continue
        result = spec.check_file(rel.replace(os.sep, "/") + ("/" if is_dir else ""))
        if result.include is not None:
            verdict = result.include
    return verdict


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class _Excluder:
    """`exclude` patterns for entries found under one walked argument.

    Each set of patterns (the configuration's, relative to its folder; the
    command line's, relative to the current folder) is matched against paths
    relative to its folder, so anchored patterns work (entries beside that
    folder, when it lies inside the walked one, only match unanchored
    patterns). When the walked argument lies outside or beside that folder,
    or is itself excluded (the user named it explicitly), they are matched
    relative to the argument instead: folders above what the user asked for
    never exclude it (e.g. linting `.../site-packages/torch/nn` lints it,
    though `site-packages` is excluded).
    """

    def __init__(self, settings: Settings, arg: str) -> None:
        arg = os.path.abspath(arg)
        self.specs = []
        for root, spec in settings.exclude_specs():
            root = os.path.abspath(root)
            base = arg
            if _under(arg, root):
                rel = os.path.relpath(arg, root).replace(os.sep, "/")
                if rel == "." or not spec.match_file(rel + "/"):
                    base = root
            elif _under(root, arg):  # the patterns' folder lies inside the walked one
                base = root
            self.specs.append((base, spec))

    def __call__(self, path: str, is_dir: bool) -> bool:
        abspath = os.path.abspath(path)
        for base, spec in self.specs:
            # Beside the patterns' folder (inside the walked one): `../x/y.py`,
            # which anchored patterns never match and others match by name.
            rel = os.path.relpath(abspath, base).replace(os.sep, "/")
            if spec.match_file(rel + "/" if is_dir else rel):
                return True
        return False


class _Walker:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.gitignore = settings.respect_gitignore
        self.files: List[str] = []
        self.problems: List[Problem] = []
        self.seen_dirs: Set[str] = set()
        self.excluded: _Excluder = _Excluder(settings, ".")

    def walk(self, folder: str, ignores: List[_Ignore], named: bool = False) -> None:
        """Collect the files under `folder`; `named`: the user named it (its
        disappearance is a problem; a folder found by the walk that vanishes
        before it is read is skipped)."""
        real = os.path.realpath(folder)
        if real in self.seen_dirs:
            return
        self.seen_dirs.add(real)
        own = _read_gitignore(folder) if self.gitignore else None
        if own:
            ignores = ignores + [own]
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not named:
                return  # removed (or replaced by a file) while the walk went on: skipped, as a broken link is
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
    if settings.is_excluded(path):
        return True
    if not settings.respect_gitignore:
        return False
    folder = os.path.dirname(path) or "."
    ignores = _ancestor_ignores(folder)
    own = _read_gitignore(folder)
    if own:
        ignores.append(own)
    return _gitignored_here(path, False, ignores)


def excluded(path: str, settings: Settings, root: str) -> bool:
    """Whether a walk of `root` would skip file `path` (under it): the file or
    a folder on the way excluded, or gitignored."""
    if _excluded_file(path, settings):
        return True
    root = os.path.abspath(root)
    folder = os.path.dirname(os.path.abspath(path))
    while folder != root and _under(folder, root):
        if settings.is_excluded(folder):
            return True
        folder = os.path.dirname(folder)
    return False


def _unlintable(path: str) -> Optional[str]:
    """Why a named path that is neither a folder nor a regular file cannot be
    linted, without opening it (a FIFO would block)."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symlink loop (too many levels of symbolic links)"
        if exc.errno == errno.ENOENT:
            if os.path.islink(path):
                return f"broken symlink (its target {os.readlink(path)!r} does not exist)"
            return "no such file or directory"
        return f"cannot read path: {exc.strerror or exc}"
    mode = st.st_mode
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return f"not a regular file: {kind}; skipped"
    return "not a regular file or folder; skipped"


def discover(paths: Iterable[str], settings: Settings, force_exclude: bool = False) -> Discovered:
    """Expand `paths` into lintable files (sorted, unique) and problems.

    A named path is linted whatever `exclude` and `.gitignore` say, unless
    `force_exclude` (or the settings' `force_exclude`) is set: then `exclude`
    applies to named files and folders too."""
    force_exclude = force_exclude or settings.force_exclude
    walker = _Walker(settings)
    for raw in paths:
        path = os.path.normpath(raw)
        if os.path.isdir(path):
            if force_exclude and settings.is_excluded(path):
                continue
            walker.excluded = _Excluder(settings, path)
            walker.walk(path, _ancestor_ignores(path) if settings.respect_gitignore else [], named=True)
        elif os.path.isfile(path):
            if force_exclude and _excluded_file(path, settings):
                continue
            walker.files.append(path)
        else:
            walker.problems.append(Problem(path, _unlintable(path) or "cannot read path"))
    unique: List[str] = []
    seen: Set[str] = set()
    for path in sorted(walker.files):
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            unique.append(path)
    problems = sorted(set(walker.problems), key=lambda p: (p.path, p.message))
    return Discovered(tuple(unique), tuple(problems))
