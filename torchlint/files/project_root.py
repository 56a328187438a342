"""Where a run's file's project is: the folder the project pass may read
other files from (torchlint/analysis/project/imports.py), never a folder
that merely holds the project.

For a file the run lints, found under the path `linted` the run was given
(a folder, or the file itself):

1. the configuration's folder, when a configuration is in force (the
   configuration file found above the first path: a `pyproject.toml` with
   `[tool.torchlint]`, a `torchlint.toml` or `.torchlint.toml`; or the one
   `--config` names) and it holds the file;
2. else the nearest folder at or above the file holding a project marker:
   `pyproject.toml` (with or without a `[tool.torchlint]` table),
   `torchlint.toml`, `.torchlint.toml`, `setup.py`, `setup.cfg` or `.git` (a folder, or the file a worktree or a
   submodule has);
3. else the linted path itself (a file's folder), or, when that is a
   package (it holds `__init__.py`), the folder its top-level package sits
   in: `torchlint src/pkg/train.py` imports `pkg.models` from `src/`.

So a folder linted inside a larger tree without markers (a home folder, a
scratch area holding other checkouts) is a project of its own, and
`torchlint DIR` costs what DIR costs wherever it sits.
"""

from __future__ import annotations

import os
from typing import Dict, Iterable, Optional, Sequence

MARKERS = ("pyproject.toml", "torchlint.toml", ".torchlint.toml", "setup.py", "setup.cfg", ".git")


class ProjectRoots:
    """The project root of each of a run's files (`of`), markers looked up
    once per folder."""

    def __init__(self, linted: Sequence[str], config_root: Optional[str] = None) -> None:
        # The run's paths, deepest first (a file is found under the deepest that holds it).
        self._linted = sorted({os.path.realpath(p) for p in linted}, key=len, reverse=True)
        self._config = os.path.realpath(config_root) if config_root is not None else None
        self._marked: Dict[str, bool] = {}

    def _has_marker(self, folder: str) -> bool:
        found = self._marked.get(folder)
        if found is None:
            found = any(os.path.lexists(os.path.join(folder, name)) for name in MARKERS)
            self._marked[folder] = found
        return found

    def linted_path(self, path: str) -> str:
        """The run's path that holds `path` (the file itself when none does)."""
        real = os.path.realpath(path)
        for linted in self._linted:
            if real == linted or real.startswith(linted.rstrip(os.sep) + os.sep):
                return linted
        return real

    def of(self, path: str) -> str:
        """The project root of file `path` (a real path; see the module)."""
        real = os.path.realpath(path)
        if self._config is not None and _under(real, self._config):
            return self._config
        folder = os.path.dirname(real)
        while True:
            if self._has_marker(folder):
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        linted = self.linted_path(real)
        base = linted if os.path.isdir(linted) else os.path.dirname(linted)
        while os.path.isfile(os.path.join(base, "__init__.py")):
            parent = os.path.dirname(base)
            if parent == base:
                break
            base = parent
        return base

    def roots(self, paths: Iterable[str]) -> Dict[str, str]:
        """path -> its project root, for each of `paths`."""
        return {path: self.of(path) for path in paths}


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def deepest_holding(path: str, roots: Iterable[str]) -> Optional[str]:
    """Of `roots` (real paths), the deepest that holds `path`; None if none does."""
    real = os.path.realpath(path)
    found = [r for r in roots if _under(real, r)]
    return max(found, key=len) if found else None


__all__ = ["MARKERS", "ProjectRoots", "deepest_holding"]
