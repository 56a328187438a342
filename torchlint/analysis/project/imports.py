"""The project files a run's files import, read too (never linted).

A run over some files of a project (`torchlint train.py`, pre-commit's changed
files) would otherwise know nothing of `from model import Net`. So the
project pass follows the run's imports to files on disk, breadth-first and
transitively, at most `MAX_IMPORTED` of them, and summarises those as well:
the questions about imported names get the answers a run over the whole
project gives.

A name is looked for where the index would match it (modules.py): a
relative import from the importing file's package folder; an absolute one
(`models.base.X`: `models/__init__.py`, `models.py`, `models/base.py`, ...)
from the importing file's folder and each folder above it, up to the project
root (the configuration's folder, or the current one; for a run's file
outside it, the folder its top-level package sits in: its own folder, or
the first one above it without an `__init__.py`). Only files under the project root are
read, and only those `admit` lets in (the run's exclusions); a name found
nowhere stays unknown.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Callable, Deque, Dict, FrozenSet, Iterator, List, Mapping, Optional, Set, Tuple

from torchlint.analysis.project.kinds import ModuleSummary

MAX_IMPORTED = 200  # files read beyond the run's own, at most

Summarise = Callable[[str], Optional[ModuleSummary]]  # a path's summary; None: unreadable


class _Folders:
    """Each folder's entries, listed once."""

    def __init__(self) -> None:
        self._entries: Dict[str, FrozenSet[str]] = {}

    def entries(self, folder: str) -> FrozenSet[str]:
        found = self._entries.get(folder)
        if found is None:
            try:
                found = frozenset(os.listdir(folder))
            except OSError:
                found = frozenset()
            self._entries[folder] = found
        return found

    def modules(self, base: str, parts: List[str], package: bool) -> Iterator[str]:
        """The files `parts` names under `base`: each module or package's
        `__init__.py` along the way (`base`'s own too when `package`)."""
        folder = base
        if package and "__init__.py" in self.entries(folder):
            yield os.path.join(folder, "__init__.py")
        for part in parts:
            names = self.entries(folder)
            if part + ".py" in names:
                yield os.path.join(folder, part + ".py")
            if part not in names:
                return
            folder = os.path.join(folder, part)
            if "__init__.py" in self.entries(folder):
                yield os.path.join(folder, "__init__.py")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _targets(folders: _Folders, importer: str, name: str, root: str) -> Iterator[str]:
    """The files on disk that import `name` of file `importer` (absolute) may name."""
    level = len(name) - len(name.lstrip("."))
    parts = [p for p in name[level:].split(".") if p]
    here = os.path.dirname(importer)
    if level:
        for _ in range(level - 1):
            here = os.path.dirname(here)
        if _under(here, root):
            yield from folders.modules(here, parts, True)
        return
    if not parts:
        return
    while _under(here, root):
        yield from folders.modules(here, parts, False)
        parent = os.path.dirname(here)
        if parent == here:
            return
        here = parent


def imported_summaries(
    run: Mapping[str, ModuleSummary],
    root: str,
    summarise: Summarise,
    admit: Callable[[str], bool] = lambda path: True,
    limit: int = MAX_IMPORTED,
) -> Dict[str, ModuleSummary]:
    """The summaries of the project files (under `root`, see above) that the run's files
    (`run`: path -> summary) import, directly or through each other, keyed by
    absolute path; at most `limit`, nearest first."""
    root = os.path.realpath(root)
    seen: Set[str] = {os.path.realpath(p) for p in run}
    folders = _Folders()
    # A run's file outside the project root is a project of its top-level package's folder.
    queue: Deque[Tuple[str, str]] = deque((p, _root_of(p, root, folders)) for p in sorted(run))
    summaries: Dict[str, ModuleSummary] = dict(run)
    found: Dict[str, ModuleSummary] = {}
    while queue and len(found) < limit:
        importer, here = queue.popleft()
        summary = summaries[importer]
        absolute = os.path.abspath(importer)
        names = [name for _, name in summary.imports] + list(summary.star_imports)
        for name in names:
            for path in _targets(folders, absolute, name, here):
                real = os.path.realpath(path)
                if real in seen or not _under(real, here):
                    continue
                seen.add(real)
                if not admit(path):
                    continue
                read = summarise(path)
                if read is None:
                    continue
                found[path] = summaries[path] = read
                queue.append((path, here))
                if len(found) >= limit:
                    return found
    return found


def _root_of(path: str, root: str, folders: _Folders) -> str:
    """The project root for a run's file: `root` when it holds the file; else the
    folder its top-level package sits in (up from its own folder while that
    folder is a package: `src/train.py` with `src/__init__.py` imports
    `src.models` from the folder above)."""
    real = os.path.realpath(path)
    if _under(real, root):
        return root
    folder = os.path.dirname(real)
    while "__init__.py" in folders.entries(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


__all__ = ["MAX_IMPORTED", "imported_summaries"]
