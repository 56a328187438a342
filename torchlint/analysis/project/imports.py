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
from the importing file's folder and each folder above it, up to the file's
project root (`roots`: where its project is, torchlint/files/project_root.py;
given one folder instead, a run's file outside it has the folder its
top-level package sits in: its own folder, or the first one above it without
an `__init__.py`). Only files under the project root are read, and only
those `admit` lets in (the run's exclusions); a name found nowhere stays
unknown.

The project files that import a run's files are read too (`importers`):
whether a file importing a class moves it to an accelerator, every caller
of a class, whether another file imports a name are project questions a run
over `model.py` alone would otherwise answer from model.py. The `.py` files
under each run file's project root are listed once (hidden folders, venvs,
`site-packages`, `__pycache__` and what `admit` leaves out are skipped; a
root with more than `MAX_LISTED` of them (or folders, or twenty times as many
entries of any kind: a data folder), or one inside `site-packages`, is
not searched: such a run reads only what its files import). A listed file
whose text names a run file's module as a whole word in an import statement
(`loss` for `training/loss.py`; the folder's name for a package's
`__init__.py`: a cheap test before parsing, each file's text read once) is
an importer when one of its imports names that file as the forward search
would find it (`from .loss import X`, `from nanofold.training import loss`,
`import training.loss as L`). Given `names` (a path's imported names,
import_names.py: a parse without the summary's walk), that is asked first,
and only an importer is summarised; other files are left out of the index
(`from torch.utils.data import DataLoader` names no project `data.py`).
Importers of importers are found the same way, `IMPORTER_LEVELS` deep
(a package's `__init__.py` re-exporting the class, then its users); then
what the importers import is followed as above (trainer.py imports the
model's file and the device's). These files, importers and what they
import, are at most `MAX_IMPORTERS`, apart from `MAX_IMPORTED`.

All of it runs within a `Budget`, per project root: at most `MAX_READ` files summarised
outside the run (from the summary cache or parsed: the count, not the
clock, decides which, so a warm run reads what a cold one read) and
`MAX_SECONDS` of CPU time, listing included. The search stops where it
crosses either, or skips a root too big to list, and the budget records
it (`Budget.crossed`: which root, how many files) for the run to report once.
"""

from __future__ import annotations

import os
import re
import time
from collections import deque
from typing import Callable, Deque, Dict, FrozenSet, Iterator, List, Mapping, Optional, Set, Tuple, Union

from torchlint.analysis.project.kinds import ModuleSummary

MAX_IMPORTED = 200  # files read beyond the run's own, at most
MAX_IMPORTERS = 100  # files read for the run's importers (and what they import), at most
MAX_LISTED = 5000  # a project root with more `.py` files than this is not searched for importers
ENTRIES_PER_LISTED = 20  # ...nor one with more than MAX_LISTED * this entries of any kind (a data folder)
IMPORTER_LEVELS = 3  # importers, their importers, theirs
MAX_READ = 500  # files summarised outside the run (imported, importers, candidates), at most
MAX_SECONDS = 5.0  # CPU seconds (of the searching thread) the whole search may take, listing included
# Folders never listed for importers (besides hidden ones and venvs).
_UNLISTED = frozenset({"__pycache__", "site-packages", "dist-packages", "node_modules"})

Summarise = Callable[[str], Optional[ModuleSummary]]  # a path's summary; None: unreadable
ImportedNames = Callable[[str], Tuple[str, ...]]  # a path's imported names (import_names.py); () if unreadable

# Why a search stopped short (`Budget.crossed`).
FILES, SECONDS, LISTING = "files", "seconds", "listing"


class Budget:
    """What one run's search may read outside the run's files, under each
    project root it searches (`files` summaries and `seconds` of `clock` per
    root: a run over several projects gives each its own allowance, so one big
    project does not leave the others unsearched; the clock is the searching
    thread's CPU time, which a busy machine disturbs less than the wall clock,
    and the file counts bound what waiting on a slow disk costs), and where it
    crossed that: `crossed`, (root, why) in order, why one of FILES, SECONDS
    (the search stopped under that root) or LISTING (that root held too many
    files to list: not searched for importers); `read`, the files summarised."""

    def __init__(
        self,
        files: Optional[int] = None,
        seconds: Optional[float] = None,
        clock: Callable[[], float] = time.thread_time,
    ) -> None:
        self.files = MAX_READ if files is None else files
        self.seconds = MAX_SECONDS if seconds is None else seconds
        self._clock = clock
        self._used: Dict[str, float] = {}  # root -> seconds charged to it
        self._current: Optional[Tuple[str, float]] = None  # the root searched now, since when
        self._read: Dict[str, int] = {}  # root -> files summarised under it
        self.crossed: List[Tuple[str, str]] = []

    @property
    def read(self) -> int:
        """Files summarised, under every root."""
        return sum(self._read.values())

    def read_under(self, root: str) -> int:
        return self._read.get(root, 0)

    def spent_in(self, root: str) -> bool:
        """The search under `root` stopped: nothing more is read there."""
        return any(r == root and why != LISTING for r, why in self.crossed)

    def cross(self, root: str, why: str) -> None:
        if (root, why) not in self.crossed:
            self.crossed.append((root, why))

    def _charge(self, root: str) -> float:
        """Charge the time since the last question to the root searched then;
        `root`'s seconds so far."""
        now = self._clock()
        if self._current is not None:
            before, since = self._current
            self._used[before] = self._used.get(before, 0.0) + (now - since)
        self._current = (root, now)
        return self._used.get(root, 0.0)

    def in_time(self, root: str) -> bool:
        """Whether the search (now under `root`) may go on."""
        if self.spent_in(root):
            return False
        if self._charge(root) > self.seconds:
            self.cross(root, SECONDS)
            return False
        return True

    def take(self, root: str) -> bool:
        """Whether one more file (under `root`) may be summarised: counted if so."""
        if not self.in_time(root):
            return False
        if self._read.get(root, 0) >= self.files:
            self.cross(root, FILES)
            return False
        self._read[root] = self._read.get(root, 0) + 1
        return True


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
    root: Union[str, Mapping[str, str]],
    summarise: Summarise,
    admit: Callable[[str], bool] = lambda path: True,
    limit: int = MAX_IMPORTED,
    importers: int = MAX_IMPORTERS,
    listed: Optional[int] = None,
    budget: Optional[Budget] = None,
    names: Optional[ImportedNames] = None,
) -> Dict[str, ModuleSummary]:
    """The summaries of the project files (under each run file's project root,
    see above) that the run's files (`run`: path -> summary) import, directly or
    through each other (at most `limit`, nearest first), then of those that import
    the run's files and of what they import (at most `importers`; none when 0),
    keyed by absolute path; a root with more than `listed` files (`MAX_LISTED`)
    is not searched for importers; all within `budget` (a fresh `Budget()` when None).
    `names`: a cheap superset of a path's imported names, asked before a
    candidate importer is summarised (None: every candidate is summarised).

    `root`: each run file's project root (path -> folder), or one folder for all
    (a run's file outside it has the folder its top-level package sits in)."""
    folders = _Folders()
    if isinstance(root, str):
        top = os.path.realpath(root)
        roots = {p: _root_of(p, top, folders) for p in run}
    else:
        roots = {p: os.path.realpath(root[p]) for p in run}
    budget = budget if budget is not None else Budget()
    walk = _Walk(folders, dict(run), {os.path.realpath(p) for p in run}, summarise, admit, budget, names)
    found = walk.follow([(p, roots[p]) for p in sorted(run)], limit)
    if importers > 0:
        found.update(walk.importers(roots, importers, MAX_LISTED if listed is None else listed))
    return found


class _Walk:
    """One run's search of the project: the files read so far, and their summaries."""

    def __init__(
        self,
        folders: _Folders,
        summaries: Dict[str, ModuleSummary],
        seen: Set[str],
        summarise: Summarise,
        admit: Callable[[str], bool],
        budget: Budget,
        names: Optional[ImportedNames] = None,
    ) -> None:
        self.folders = folders
        self.summaries = summaries
        self.seen = seen  # real paths, read or passed over
        self.passed: Dict[str, ModuleSummary] = {}  # read for importers, found none (real path -> summary)
        self.words: Dict[str, FrozenSet[bytes]] = {}  # real path -> the words of its import statements
        self.names = names
        self.named: Dict[str, Tuple[str, ...]] = {}  # real path -> its imported names (`names`)
        self._real: Dict[str, str] = {}  # path -> real path
        self.summarise = summarise
        self.admit = admit
        self.budget = budget

    def real(self, path: str) -> str:
        found = self._real.get(path)
        if found is None:
            found = self._real[path] = os.path.realpath(path)
        return found

    def read(self, path: str, root: str) -> Optional[ModuleSummary]:
        """`path`'s summary (under `root`), once (None: seen before, not admitted,
        unreadable, or the budget spent)."""
        real = self.real(path)
        passed = self.passed.pop(real, None)
        if passed is not None:  # read while looking for importers, found none: imported now
            self.summaries[path] = passed
            return passed
        if real in self.seen:
            return None
        if not self.admit(path):
            self.seen.add(real)
            return None
        if not self.budget.take(root):
            return None
        self.seen.add(real)
        read = self.summarise(path)
        if read is not None:
            self.summaries[path] = read
        return read

    def follow(self, start: List[Tuple[str, str]], limit: int) -> Dict[str, ModuleSummary]:
        """What the files `start` ((path, its root)) import, breadth-first, at most `limit`."""
        queue: Deque[Tuple[str, str]] = deque(start)
        found: Dict[str, ModuleSummary] = {}
        while queue and len(found) < limit:
            importer, here = queue.popleft()
            if self.budget.spent_in(here):
                continue
            summary = self.summaries[importer]
            absolute = os.path.abspath(importer)
            names = [name for _, name in summary.imports] + list(summary.star_imports)
            for name in names:
                for path in _targets(self.folders, absolute, name, here):
                    if not _under(self.real(path), here):
                        continue
                    read = self.read(path, here)
                    if read is None:
                        continue
                    found[path] = read
                    queue.append((path, here))
                    if len(found) >= limit:
                        return found
        return found

    def importers(self, roots: Mapping[str, str], limit: int, listed: int) -> Dict[str, ModuleSummary]:
        """The files under each run file's root (`roots`: path -> root) that import it,
        `IMPORTER_LEVELS` deep, then what they import: at most `limit`."""
        by_root: Dict[str, List[str]] = {}
        for path, here in sorted(roots.items()):
            by_root.setdefault(here, []).append(path)
        found: Dict[str, ModuleSummary] = {}
        start: List[Tuple[str, str]] = []
        for here, paths in sorted(by_root.items()):
            if _UNLISTED & set(here.split(os.sep)):  # installed code: its importers are no project's
                continue
            files = listing(here, self.admit, listed, self.budget)
            if files is None:
                if not self.budget.spent_in(here):
                    self.budget.cross(here, LISTING)
                continue
            level = {os.path.realpath(p): p for p in paths}
            for _ in range(IMPORTER_LEVELS):
                level = self._importers_of(level, files, here, limit - len(found))
                found.update((path, self.summaries[path]) for path in level.values())
                start += [(path, here) for path in level.values()]
                if not level or len(found) >= limit:
                    break
        if len(found) < limit:
            found.update(self.follow(start, limit - len(found)))
        return found

    def _importers_of(self, targets: Dict[str, str], files: List[str], here: str, limit: int) -> Dict[str, str]:
        """The unread `files` (under root `here`) that import one of `targets`
        (real path -> path): real path -> path, at most `limit`."""
        words = frozenset(_module_word(p).encode("utf-8", "surrogatepass") for p in targets.values())
        if not words or limit <= 0:
            return {}
        found: Dict[str, str] = {}
        for path in files:
            if not self.budget.in_time(here):
                break
            real = self.real(path)
            summary = self.passed.get(real)
            if summary is None:
                if real in self.seen or not _under(real, here) or self._import_words(real).isdisjoint(words):
                    continue
                if not self._may_import(path, real, here, targets):
                    continue
                summary = self.read(path, here)
                if summary is None:
                    continue
                del self.summaries[path]  # not in the index unless an importer
            absolute = os.path.abspath(path)
            names = [name for _, name in summary.imports] + list(summary.star_imports)
            if not any(_named(self.folders, absolute, name, here) in targets for name in names):
                self.passed[real] = summary  # a later level may ask again
                continue
            self.passed.pop(real, None)
            self.summaries[path] = summary
            found[real] = path
            if len(found) >= limit:
                break
        return found

    def _may_import(self, path: str, real: str, here: str, targets: Dict[str, str]) -> bool:
        """Whether one of the names `path` imports (the `names` superset; True
        without it) names one of `targets`, as the summary's imports are tested."""
        if self.names is None:
            return True
        found = self.named.get(real)
        if found is None:
            found = self.named[real] = self.names(path)
        absolute = os.path.abspath(path)
        return any(_named(self.folders, absolute, name, here) in targets for name in found)

    def _import_words(self, real: str) -> FrozenSet[bytes]:
        found = self.words.get(real)
        if found is None:
            found = self.words[real] = _import_words(real)
        return found


# A cheap test that a file's text may import a module named a given word: the
# words after `import` or `from` at a line's start, with only names, dots,
# commas, brackets and blanks between (`from pkg import (\n    loss,`).
_IMPORT_RUN = re.compile(rb"^[ \t]*(?:from|import)\s([\w.\s,()\\\x80-\xff]*)", re.MULTILINE)
_WORD = re.compile(rb"\w+")
_WIDE_WORD = re.compile(rb"[\w\x80-\xff]+")  # a name spelled with non-ASCII letters too


def _import_words(path: str) -> FrozenSet[bytes]:
    """The words of `path`'s import statements as the cheap test reads them (a
    word of a module name: `loss` of `from training.loss import X`); read once."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return frozenset()
    out: Set[bytes] = set()
    for match in _IMPORT_RUN.finditer(data):
        text = match.group(1)
        out.update(_WORD.findall(text))
        if not text.isascii():
            out.update(_WIDE_WORD.findall(text))
    return frozenset(out)


def _named(folders: _Folders, importer: str, name: str, root: str) -> Optional[str]:
    """The real path of the module import `name` of file `importer` names itself (the
    deepest file found: `loss.py` for `training.loss.X`, not `training/__init__.py`)."""
    last = None
    for path in _targets(folders, importer, name, root):
        last = path
    return os.path.realpath(last) if last is not None else None


def _module_word(path: str) -> str:
    """The name a file is imported by last: `loss` for `training/loss.py`, the
    folder's name for a package's `__init__.py`."""
    stem = os.path.splitext(os.path.basename(path))[0]
    return os.path.basename(os.path.dirname(os.path.abspath(path))) if stem == "__init__" else stem


def _regular(entry: "os.DirEntry[str]") -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def listing(
    root: str, admit: Callable[[str], bool], limit: int, budget: Optional[Budget] = None
) -> Optional[List[str]]:
    """The `.py` files under `root` (sorted; hidden folders, venvs, `_UNLISTED` and
    what `admit` leaves out skipped); None for more than `limit` files or folders (or
    `limit * ENTRIES_PER_LISTED` entries of any kind), a root inside
    `site-packages` (installed code: its importers are no project's), or when
    `budget`'s time runs out."""
    if _UNLISTED & set(root.split(os.sep)):
        return None
    files: List[str] = []
    folders = [root]
    visited: Set[Tuple[int, int]] = set()
    entries_left = limit * ENTRIES_PER_LISTED  # a data folder of many files gives up too
    while folders:
        if budget is not None and not budget.in_time(root):
            return None
        folder = folders.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in visited:  # a link back to a folder listed already
            continue
        visited.add((st.st_dev, st.st_ino))
        if len(visited) > limit:
            return None
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        entries_left -= len(entries)
        if entries_left < 0:
            return None
        for entry in entries:
            try:
                is_dir = entry.is_dir()
            except OSError:
                continue
            if is_dir:
                if entry.name.startswith(".") or entry.name in _UNLISTED:
                    continue
                if os.path.exists(os.path.join(entry.path, "pyvenv.cfg")) or not admit(entry.path):
                    continue
                folders.append(entry.path)
            elif entry.name.endswith(".py") and _regular(entry):  # never a FIFO: opening it blocks
                files.append(entry.path)
                if len(files) > limit:
                    return None
    return sorted(files)


def _root_of(path: str, root: str, folders: _Folders) -> str:
    """The project root for a run's file given one folder: `root` when it holds the
    file; else the folder its top-level package sits in (up from its own folder
    while that folder is a package: `src/train.py` with `src/__init__.py` imports
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


__all__ = [
    "MAX_IMPORTED",
    "MAX_IMPORTERS",
    "MAX_LISTED",
    "MAX_READ",
    "MAX_SECONDS",
    "Budget",
    "imported_summaries",
    "listing",
]
