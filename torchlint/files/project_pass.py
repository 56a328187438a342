"""Building the project index: from a run's files (each summary cached by the
file's contents, next to the results cache), or for a workspace kept warm
by the language server (one file's summary replaced when its text changes)."""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from typing import TYPE_CHECKING, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

from torchlint.analysis.project.import_names import imported_names
from torchlint.analysis.project.imports import Budget, imported_summaries
from torchlint.analysis.project.index import ProjectIndex
from torchlint.analysis.project.kinds import ModuleSummary
from torchlint.analysis.project.summary import summarize

if TYPE_CHECKING:
    from torchlint.config import Settings
    from torchlint.files.cache import Cache
    from torchlint.findings import Problem

log = logging.getLogger("torchlint")

# The results cache's key for summaries (they depend on the contents only).
SUMMARY_CACHE_KEY = "project-summary"
# A workspace with more files than this is not scanned (each open file is still summarised).
MAX_WORKSPACE_FILES = 5000


def summarize_bytes(path: str, data: bytes) -> ModuleSummary:
    """The summary of a file's contents: Python decoded as Python does, a
    notebook's code cells; anything unreadable knows nothing."""
    text = _source_text(path, data)
    if text is None:
        return ModuleSummary(parsed=False)
    return summarize(text) if text else ModuleSummary()


def imported_names_bytes(path: str, data: bytes) -> Tuple[str, ...]:
    """The names a file's import statements bind (import_names.py), read as
    `summarize_bytes` reads the file; none when it is unreadable."""
    text = _source_text(path, data)
    return imported_names(text) if text else ()


def _source_text(path: str, data: bytes) -> Optional[str]:
    """The Python source of a file's contents (a notebook's code cells, "" for a
    notebook without any); None when it cannot be read."""
    if path.endswith(".ipynb"):
        from torchlint.source import notebook

        try:
            cells = notebook.read(data)
        except notebook.NotebookError:
            return None
        return cells.source if cells is not None else ""
    from torchlint.source.decode import DecodeError, decode_source

    try:
        text = decode_source(data).text
    except DecodeError:
        return None
    return text.lstrip("\ufeff")


# The summaries' subfolder of the results cache's folder (`.torchlint_cache/project/`).
SUMMARY_FOLDER = "project"


def summary_cache(cache_root: str, cache_dir: Optional[str] = None) -> "Cache":
    """A `torchlint.files.cache.Cache` for summaries, in their own subfolder of the
    results cache's folder (so `torchlint clean` removes them too)."""
    from torchlint.files.cache import CACHE_DIR_NAME, Cache

    folder = cache_dir if cache_dir is not None else os.path.join(cache_root, CACHE_DIR_NAME)
    return Cache(cache_root, SUMMARY_CACHE_KEY, cache_dir=os.path.join(folder, SUMMARY_FOLDER))


# The variant prefix of a file's imported names in the summary cache (beside its summary's, its path).
NAMES_VARIANT = "imported-names:"


def _cached_names(path: str, cache: Optional["Cache"]) -> Tuple[str, ...]:
    """`imported_names_bytes` of the file at `path`, cached by its contents
    (a warm run asks the importer search's test without parsing)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return ()
    found = cache.get(data, NAMES_VARIANT + path) if cache is not None else None
    if not isinstance(found, tuple):
        found = imported_names_bytes(path, data)
        if cache is not None:
            cache.put(data, NAMES_VARIANT + path, found)
    return found


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
    project_root: Optional[Union[str, Mapping[str, str]]] = None,
    admit: Callable[[str], bool] = lambda path: True,
    budget: Optional[Budget] = None,
    whole: Sequence[str] = (),
) -> ProjectIndex:
    """The index of a run's files, given as (path, contents); `cache` (see
    `summary_cache`) answers the summaries of unchanged contents, the run's
    and the others'. With `project_root` (one folder, or each file's: see
    project_root.py), the project files under it that the run's files import,
    and those that import them (those `admit` lets in), are summarised too,
    within `budget` (imports.py). `whole`: the project roots every file of
    which is among `files` (`ProjectIndex.whole`)."""
    summaries: Dict[str, ModuleSummary] = {path: _cached_summary(path, data, cache) for path, data in files}
    if project_root is not None and summaries:

        def read(path: str) -> Optional[ModuleSummary]:
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                return None
            return _cached_summary(path, data, cache)

        def names(path: str) -> Tuple[str, ...]:
            return _cached_names(path, cache)

        summaries.update(imported_summaries(summaries, project_root, read, admit, budget=budget, names=names))
    return ProjectIndex(summaries, roots, whole=whole)


def budget_warning(budget: Budget) -> Optional["Problem"]:
    """The one warning of a run whose project pass crossed its budget (None if it
    did not): which root, how many files, and how to set the root."""
    from torchlint.analysis.project.imports import ENTRIES_PER_LISTED, LISTING, MAX_LISTED
    from torchlint.findings import Problem

    if not budget.crossed:
        return None
    root, why = budget.crossed[0]
    if why == LISTING:
        what = (
            f"{root} is too big to search for the files that import the linted ones (more than "
            f"{MAX_LISTED:,} Python files or folders, or {MAX_LISTED * ENTRIES_PER_LISTED:,} entries)"
        )
    else:
        what = (
            f"stopped reading the project's other files under {root} after {budget.read_under(root):,} "
            f"(at most {budget.files:,} files and {budget.seconds:g} CPU seconds)"
        )
    others = len({r for r, _ in budget.crossed} - {root})
    if others:
        what += f" (and {others} other project root{'s' if others > 1 else ''})"
    return Problem(
        "",
        f"project pass: {what}; findings that depend on other files may differ from a run over the "
        "whole project. The project root is the nearest folder holding a pyproject.toml, setup.py, "
        "setup.cfg or .git above the linted paths (or the --config file's): set one nearer",
    )


class Workspace:
    """A workspace's index, kept warm: built from the files under `roots` on
    first use, then one file's summary is replaced when an editor's text for
    it changes (`index_for`). Thread-safe.

    Within the bound a run has: a workspace folder with more than
    `MAX_WORKSPACE_FILES` Python files (or folders; counted without walking
    further) is not indexed whole. A file in such a folder, or in none,
    brings in what `torchlint check FILE` reads: the files of its project
    (project_root.py) it imports and that import it, within a `Budget`, when
    it is first linted. What crossed a bound is in `notes` (and logged once)."""

    def __init__(self, roots: Sequence[str], settings: Optional["Settings"] = None) -> None:
        self.roots = tuple(roots)
        self.settings = settings
        self._summaries: Optional[Dict[str, ModuleSummary]] = None
        self._texts: Dict[str, str] = {}  # path -> digest of the text last summarised
        self._index: Optional[ProjectIndex] = None
        self._indexed: Tuple[str, ...] = ()  # the roots indexed whole (real paths)
        self._searched: Set[str] = set()  # files whose project was searched (not under an indexed root)
        self.notes: List[str] = []  # the bounds crossed, said once each
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
                if self._search(key):
                    self._index = None
                path = key
            if self._index is None:
                self._index = ProjectIndex(self._summaries, self.roots, whole=self._indexed)
            return self._index

    def _note(self, message: str) -> None:
        if message not in self.notes:
            self.notes.append(message)
            log.warning("%s", message)

    def _admit(self, root: str) -> Callable[[str], bool]:
        from torchlint.config import Settings
        from torchlint.files.discovery import excluded

        settings = self.settings or Settings()
        return lambda path: not excluded(path, settings, root)

    def _scan(self) -> Dict[str, ModuleSummary]:
        if not self.roots:
            return {}
        from torchlint.analysis.project.imports import listing
        from torchlint.config import Settings
        from torchlint.files.discovery import discover

        out: Dict[str, ModuleSummary] = {}
        indexed: List[str] = []
        for root in self.roots:
            if listing(os.path.abspath(root), self._admit(os.path.abspath(root)), MAX_WORKSPACE_FILES) is None:
                self._note(
                    f"torchlint: {root} holds more than {MAX_WORKSPACE_FILES:,} Python files or folders: "
                    "not indexed whole; each file opened reads the files of its project it imports and "
                    "that import it, as `torchlint check FILE` does"
                )
                continue
            try:
                found = discover([root], self.settings or Settings())
            except Exception:  # an unreadable workspace: each open file still counts
                continue
            indexed.append(os.path.realpath(root))
            for path in found.files:
                try:
                    with open(path, "rb") as fh:
                        data = fh.read()
                except OSError:
                    continue
                out[os.path.abspath(path)] = summarize_bytes(path, data)
        self._indexed = tuple(indexed)
        return out

    def _search(self, path: str) -> bool:
        """For a file under no folder indexed whole, once: add the files of its
        project it imports and that import it (within a `Budget`); whether any was added."""
        from torchlint.files.project_root import ProjectRoots, deepest_holding

        assert self._summaries is not None
        if path in self._searched or deepest_holding(path, self._indexed) is not None:
            return False
        self._searched.add(path)
        configured = None
        if self.settings is not None and self.settings.config_path is not None:
            configured = os.path.abspath(self.settings.root)
        root = ProjectRoots([path], configured).of(path)
        budget = Budget()

        def read(other: str) -> Optional[ModuleSummary]:
            try:
                with open(other, "rb") as fh:
                    return summarize_bytes(other, fh.read())
            except OSError:
                return None

        found = imported_summaries(
            {path: self._summaries[path]},
            {path: root},
            read,
            self._admit(root),
            budget=budget,
            names=lambda other: _cached_names(other, None),
        )
        warning = budget_warning(budget)
        if warning is not None:
            self._note(f"torchlint: {warning.message}")
        added = False
        for other, summary in found.items():
            key = os.path.abspath(other)
            if key not in self._texts and key not in self._summaries:  # an editor's text wins
                self._summaries[key] = summary
                added = True
        return added
