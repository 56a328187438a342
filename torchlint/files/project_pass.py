"""Building the project index: from a run's files (each summary cached by the
file's contents, next to the results cache), or for a workspace kept warm
by the language server (one file's summary replaced when its text changes)."""

from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING, Callable, Dict, Optional, Sequence, Tuple

from torchlint.analysis.project.imports import imported_summaries
from torchlint.analysis.project.index import ProjectIndex
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize

if TYPE_CHECKING:
    from torchlint.config import Settings
    from torchlint.files.cache import Cache

# The results cache's key for summaries (they depend on the contents only).
SUMMARY_CACHE_KEY = "project-summary"
# A workspace with more files than this is not scanned (each open file is still summarised).
MAX_WORKSPACE_FILES = 5000


def summarize_bytes(path: str, data: bytes) -> ModuleSummary:
    """The summary of a file's contents: Python decoded as Python does, a
    notebook's code cells; anything unreadable knows nothing."""
    if path.endswith(".ipynb"):
        from torchlint.source import notebook

        try:
            cells = notebook.read(data)
        except notebook.NotebookError:
            return ModuleSummary(parsed=False)
        return summarize(cells.source) if cells is not None else ModuleSummary()
    from torchlint.source.decode import DecodeError, decode_source

    try:
        text = decode_source(data).text
    except DecodeError:
        return ModuleSummary(parsed=False)
    return summarize(text.lstrip("\ufeff"))


# The summaries' subfolder of the results cache's folder (`.torchlint_cache/project/`).
SUMMARY_FOLDER = "project"


def summary_cache(cache_root: str, cache_dir: Optional[str] = None) -> "Cache":
    """A `torchlint.files.cache.Cache` for summaries, in their own subfolder of the
    results cache's folder (so `torchlint clean` removes them too)."""
    from torchlint.files.cache import CACHE_DIR_NAME, Cache

    folder = cache_dir if cache_dir is not None else os.path.join(cache_root, CACHE_DIR_NAME)
    return Cache(cache_root, SUMMARY_CACHE_KEY, cache_dir=os.path.join(folder, SUMMARY_FOLDER))


def _cached_summary(path: str, data: bytes, cache: Optional["Cache"]) -> ModuleSummary:
    found = cache.get(data, path) if cache is not None else None  # a summary names its module: keyed by path too
    if not isinstance(found, ModuleSummary):
        found = summarize_bytes(path, data)
        if cache is not None:
            cache.put(data, path, found)
    return found


def build_index(
    files: Sequence[Tuple[str, bytes]],
    roots: Sequence[str] = (),
    cache: Optional["Cache"] = None,
    project_root: Optional[str] = None,
    admit: Callable[[str], bool] = lambda path: True,
) -> ProjectIndex:
    """The index of a run's files, given as (path, contents); `cache` (see
    `summary_cache`) answers the summaries of unchanged contents. With
    `project_root`, the project files under it that the run's files import
    (those `admit` lets in) are summarised too (imports.py)."""
    summaries: Dict[str, ModuleSummary] = {path: _cached_summary(path, data, cache) for path, data in files}
    if project_root is not None and summaries:

        def read(path: str) -> Optional[ModuleSummary]:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                return None
            return _cached_summary(path, data, cache)

        summaries.update(imported_summaries(summaries, project_root, read, admit))
    return ProjectIndex(summaries, roots)


class Workspace:
    """A workspace's index, kept warm: built from the files under `roots` on
    first use, then one file's summary is replaced when an editor's text for
    it changes (`index_for`). Thread-safe."""

    def __init__(self, roots: Sequence[str], settings: Optional["Settings"] = None) -> None:
        self.roots = tuple(roots)
        self.settings = settings
        self._summaries: Optional[Dict[str, ModuleSummary]] = None
        self._texts: Dict[str, str] = {}  # path -> digest of the text last summarised
        self._index: Optional[ProjectIndex] = None
        self._lock = threading.Lock()

    def index_for(self, path: Optional[str], text: str) -> ProjectIndex:
        """The index with file `path` as `text` (an editor's buffer)."""
        with self._lock:
            if self._summaries is None:
                self._summaries = self._scan()
                self._index = None
            if path is not None:
                key = os.path.abspath(path)
                digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
                if self._texts.get(key) != digest:
                    self._texts[key] = digest
                    summary = summarize_bytes(key, text.encode("utf-8", "surrogatepass"))
                    if self._summaries.get(key) != summary:
                        self._summaries[key] = summary
                        self._index = None
                path = key
            if self._index is None:
                self._index = ProjectIndex(self._summaries, self.roots)
            return self._index

    def _scan(self) -> Dict[str, ModuleSummary]:
        if not self.roots:
            return {}
        from torchlint.config import Settings
        from torchlint.files.discovery import discover

        try:
            found = discover(list(self.roots), self.settings or Settings())
        except Exception:  # an unreadable workspace: each open file still counts
            return {}
        if len(found.files) > MAX_WORKSPACE_FILES:
            return {}
        out: Dict[str, ModuleSummary] = {}
        for path in found.files:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            out[os.path.abspath(path)] = summarize_bytes(path, data)
        return out
