"""Files: discover them, read them, answer from the cache, spread the work over
processes, write fixes, merge the results. What happens to one file's contents
is torchlint/engine/pipeline.py; this module does no linting itself. Jobs and
outcomes are frozen dataclasses, so a process pool or a cache can wrap
`process_file`.

    FileJob --process_file--> FileOutcome      (one file: read, pipeline, write)
    run(paths, settings) --> RunResult         (discover, project pass, map over files, merge, sort)

Before linting, the project pass summarises every file of the run
(torchlint/analysis/project/) into one index that each file's analysis asks
about the others (classes, decorators, functions defined elsewhere). It is
set once in this process and once in each worker (`_PROJECT`), never sent
with each file.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Tuple

from torchlint.config import Settings
from torchlint.engine.outcome import MODES, FileOutcome, relabel
from torchlint.files.atomic_write import write_atomic
from torchlint.findings import Finding, Problem

if TYPE_CHECKING:
    from torchlint.analysis.project import ProjectIndex


@dataclass(frozen=True)
class FileJob:
    path: str
    enabled: FrozenSet[str]
    mode: str = "lint"  # lint | fix | diff
    unsafe: bool = False


# The project index of the run under way, in this process and in each worker.
_PROJECT: Optional["ProjectIndex"] = None


def _set_project(index: Optional["ProjectIndex"]) -> None:
    """Worker initializer (and the in-process setter): the run's project index."""
    global _PROJECT
    _PROJECT = index


@contextmanager
def _project(index: "ProjectIndex") -> Iterator[None]:
    previous = _PROJECT
    _set_project(index)
    try:
        yield
    finally:
        _set_project(previous)


def process_bytes(data: bytes, job: FileJob) -> FileOutcome:
    """The pipeline on one file's contents, with the run's project index; no I/O."""
    # Imported here, not at module level: a run answered from the cache never
    # needs the pipeline (and LibCST).
    from torchlint.engine.pipeline import process_bytes as pipeline

    return pipeline(data, job.path, job.enabled, job.mode, job.unsafe, project=_PROJECT)


def _read(path: str) -> Tuple[Optional[bytes], str]:
    """The file's bytes, or None and why it could not be read."""
    try:
        with open(path, "rb") as fh:
            return fh.read(), ""
    except FileNotFoundError:
        return None, "The file vanished before it could be read"
    except IsADirectoryError:
        return None, "The path is a directory, not a file"
    except OSError as exc:
        return None, f"Cannot read the file: {exc.strerror or exc}"


# The code of a file that could not be read (torchlint/rules/io_error.py).
IO_ERROR = "TL001"


def _unreadable(job: FileJob, message: str) -> FileOutcome:
    """What a file that could not be read gives: a TL001 finding when the run
    reports findings (lint, fix), so it is in every output format as Ruff's
    E902 is; a problem (stderr, exit 2) for `--diff` and `--add-noqa`, which
    report no findings."""
    if job.mode in ("lint", "fix"):
        from torchlint.rules import name_of  # the catalog: no LibCST

        finding = Finding(IO_ERROR, name_of(IO_ERROR), message, job.path, 1, 1, 1, 1)
        return FileOutcome(job.path, findings=(finding,))
    return FileOutcome(job.path, problems=(Problem(job.path, message[:1].lower() + message[1:]),))


def _not_written(outcome: FileOutcome, message: str) -> FileOutcome:
    problem = Problem(outcome.path, message)
    return replace(outcome, new_data=None, fixes_applied=0, problems=outcome.problems + (problem,))


def _write(outcome: FileOutcome, original: bytes) -> FileOutcome:
    """Write the fixed bytes atomically, unless the file vanished, changed since
    it was read, or is read-only."""
    path = outcome.path
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            current = fh.read()
    except FileNotFoundError:
        return _not_written(outcome, "file vanished before fixes could be written")
    except OSError as exc:
        return _not_written(outcome, f"cannot re-read file: {exc.strerror or exc}")
    if current != original:
        return _not_written(outcome, "file changed while being fixed; fixes not written")
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        return _not_written(outcome, "file is read-only; fixes not written")
    try:
        write_atomic(path, outcome.new_data or b"")
    except OSError as exc:
        return _not_written(outcome, f"cannot write fixes: {exc.strerror or exc}")
    return replace(outcome, new_data=None, written=True)


# A runner mode beside MODES: add suppression comments in place (--add-noqa).
ADD_NOQA = "add-noqa"


def _add_noqa(job: FileJob, data: bytes) -> FileOutcome:
    """`--add-noqa` on one file: `fixes_applied` counts the comments added."""
    from torchlint.engine.add_noqa import add_noqa

    result = add_noqa(data, job.path, job.enabled, _PROJECT)
    outcome = FileOutcome(
        job.path,
        problems=result.problems,
        fixes_applied=result.added,
        new_data=result.new_data,
        warnings=result.warnings,
    )
    if result.new_data is None or result.new_data == data:
        return replace(outcome, new_data=None, fixes_applied=0)
    return _write(outcome, data)


def process_file(job: FileJob) -> FileOutcome:
    """Read one file, lint or fix it; in fix mode write the result atomically."""
    data, why = _read(job.path)
    if data is None:
        return _unreadable(job, why)
    if job.mode == ADD_NOQA:
        try:
            return _add_noqa(job, data)
        except RecursionError:
            return FileOutcome(job.path, problems=(Problem(job.path, "file too deeply nested to analyse; skipped"),))
        except Exception as exc:  # an internal bug on one file must not stop the run
            message = f"internal error: {type(exc).__name__}: {exc}"
            return FileOutcome(job.path, problems=(Problem(job.path, message),))
    try:
        outcome = process_bytes(data, job)
    except RecursionError:
        return FileOutcome(job.path, problems=(Problem(job.path, "file too deeply nested to analyse; skipped"),))
    except Exception as exc:  # an internal bug on one file must not stop the run
        return FileOutcome(job.path, problems=(Problem(job.path, f"internal error: {type(exc).__name__}: {exc}"),))
    if job.mode == "fix" and outcome.new_data is not None:
        written = _write(outcome, data)
        if not written.written:  # nothing changed on disk: report what is still there
            original = process_bytes(data, replace(job, mode="lint"))
            return replace(original, problems=written.problems)
        return written
    if job.mode == "diff":
        return replace(outcome, new_data=None)
    return outcome


@dataclass(frozen=True)
class RunResult:
    findings: Tuple[Finding, ...]
    problems: Tuple[Problem, ...]
    files: int
    fixes_applied: int = 0
    diffs: Tuple[Tuple[str, str], ...] = ()  # (path, unified diff)
    # (path, cell or None, row) -> the text of that line
    lines: Dict[Tuple[str, Optional[int], int], str] = field(default_factory=dict, compare=False)
    outcomes: Tuple[FileOutcome, ...] = field(default=(), compare=False)
    warnings: Tuple[Problem, ...] = ()


Mapper = Callable[[Callable, List], Iterable]


def _default_mapper(jobs: int, weights: Optional[Sequence[int]] = None) -> Mapper:
    """A process pool across files (torchlint.files.parallel decides when one pays);
    each worker gets the run's project index once."""
    if jobs == 1:
        return lambda fn, items: [fn(item) for item in items]
    from torchlint.files.parallel import parallel_map

    return lambda fn, items: parallel_map(
        fn, items, jobs, weights=weights, initializer=_set_project, initargs=(_PROJECT,)
    )


def _lint_read(item: Tuple[FileJob, bytes]) -> FileOutcome:
    """Lint contents the parent already read (and looked up in the cache); the
    outcome carries the project-index answers the file's analysis used."""
    job, data = item
    try:
        outcome = process_bytes(data, job)
    except Exception as exc:  # an internal bug on one file must not stop the run
        return FileOutcome(job.path, problems=(Problem(job.path, f"internal error: {type(exc).__name__}: {exc}"),))
    if _PROJECT is not None:
        outcome = replace(outcome, dependencies=_PROJECT.take_dependencies(job.path))
    return outcome


def _preload() -> None:
    """Import LibCST and the rules once, before forking workers, so that each
    worker does not import them again."""
    from torchlint.rules import all_rules

    all_rules()


def _variant(job: FileJob) -> str:
    """What a file's cached result depends on besides its contents: what the
    pipeline reads from its path, and the codes enabled for it (per-file
    ignores included). Never the path itself: see torchlint/files/cache.py. What the
    result read from the project's other files is checked apart, against the
    run's project index (`ProjectIndex.still_answers`)."""
    from torchlint.files.cache import path_variant

    return f"{path_variant(job.path)}|{','.join(sorted(job.enabled))}|{job.mode}|{int(job.unsafe)}"


# Codes that read no analysis (TL000 syntax error, TL001 unreadable file): a
# run that enables only these has no question for the project index.
_NO_ANALYSIS = frozenset({"TL000", IO_ERROR})


def _project_index(
    files: Sequence[Tuple[str, bytes]],
    roots: Sequence[str],
    summaries=None,
    items: Sequence[FileJob] = (),
    settings: Optional[Settings] = None,
    budget=None,
) -> "ProjectIndex":
    """The project pass over a run's files (summaries cached in `summaries`),
    and, given `settings`, the files of each one's project (its project root:
    torchlint/files/project_root.py) they import and that import them, within
    `budget` (an `imports.Budget`); an empty index when no file of the run has
    a rule that reads the analysis."""
    from torchlint.files.project_pass import build_index

    if items and all(job.enabled <= _NO_ANALYSIS for job in items):
        return build_index((), roots)
    if settings is None:
        return build_index(files, roots, summaries)
    from torchlint.files.discovery import excluded
    from torchlint.files.project_root import ProjectRoots, deepest_holding

    configured = os.path.abspath(settings.root) if settings.config_path is not None else None
    project = ProjectRoots(roots, configured).roots(path for path, _ in files)
    tops = set(project.values())

    def admit(path: str) -> bool:
        return not excluded(path, settings, deepest_holding(path, tops) or os.path.abspath(settings.root))

    # A project root under a folder the run was given is linted whole: every file is in the index.
    folders = [os.path.realpath(r) for r in roots if os.path.isdir(r)]
    whole = sorted(top for top in tops if deepest_holding(top, folders) is not None)
    return build_index(files, roots, summaries, project, admit, budget, whole=whole)


def read_all(paths: Iterable[str]) -> List[Tuple[str, bytes]]:
    """(path, contents) of every readable file (for a project pass)."""
    out = []
    for path in paths:
        data, _ = _read(path)
        if data is not None:
            out.append((path, data))
    return out


def _lint_cached(
    items: List[FileJob],
    mapper: Optional[Mapper],
    jobs: int,
    cache,
    roots: Sequence[str] = (),
    summaries=None,
    settings: Optional[Settings] = None,
    budget=None,
) -> List[FileOutcome]:
    """Lint mode with the cache: read each file once, build the project index,
    answer hits from the cache (while the index gives the answers they used),
    lint the misses (in a pool when it pays), store results without problems."""
    outcomes: List[Optional[FileOutcome]] = [None] * len(items)
    read: List[Tuple[int, bytes]] = []
    for i, job in enumerate(items):
        data, why = _read(job.path)
        if data is None:
            outcomes[i] = _unreadable(job, why)
        else:
            read.append((i, data))
    index = _project_index([(items[i].path, data) for i, data in read], roots, summaries, items, settings, budget)
    todo: List[Tuple[int, bytes]] = []
    for i, data in read:
        job = items[i]
        hit = cache.get(data, _variant(job)) if cache is not None else None
        if isinstance(hit, FileOutcome) and index.still_answers(job.path, hit.dependencies):
            outcomes[i] = relabel(hit, job.path)
        else:
            todo.append((i, data))
    if todo:
        _preload()
        work = [(items[i], data) for i, data in todo]
        with _project(index):
            done = (mapper or _default_mapper(jobs, [len(d) for _, d in todo]))(_lint_read, work)
        where = {items[i].path: (i, data) for i, data in todo}
        for out in done:  # matched by path: a mapper need not keep the order
            i, data = where[out.path]
            outcomes[i] = out
            # Results with problems (a crashed rule) are not cached: the next run retries.
            if cache is not None and not out.problems:
                cache.put(data, _variant(items[i]), out)
    return outcomes  # type: ignore[return-value]


def merge(
    outcomes: Sequence[FileOutcome],
    files: int,
    extra_problems: Sequence[Problem] = (),
    extra_warnings: Sequence[Problem] = (),
) -> RunResult:
    findings: List[Finding] = []
    problems: List[Problem] = list(extra_problems)
    warnings: List[Problem] = list(extra_warnings)
    lines: Dict[Tuple[str, Optional[int], int], str] = {}
    diffs = []
    fixed = 0
    for out in sorted(outcomes, key=lambda o: o.path):
        findings.extend(out.findings)
        problems.extend(out.problems)
        warnings.extend(out.warnings)  # in file order, then row order
        fixed += out.fixes_applied
        if out.diff:
            diffs.append((out.path, out.diff))
        for cell, row, text in out.lines:
            lines[(out.path, cell, row)] = text
    findings.sort(key=Finding.sort_key)
    problems.sort(key=lambda p: (p.path, p.rule or "", p.message))
    diffs.sort()
    return RunResult(
        tuple(findings), tuple(problems), files, fixed, tuple(diffs), lines, tuple(outcomes), tuple(warnings)
    )


def run(
    paths: Sequence[str],
    settings: Settings,
    mode: str = "lint",
    unsafe: bool = False,
    jobs: int = 1,
    force_exclude: bool = False,
    mapper: Optional[Mapper] = None,
    cache_root: Optional[str] = None,
    cache_dir: Optional[str] = None,
) -> RunResult:
    """Discover files under `paths` and lint (or fix, or diff, or add `# noqa`
    comments to) each one.

    With `cache_root`, lint results are cached in `<cache_root>/.torchlint_cache`,
    or in `cache_dir` when given (fixing always re-reads and re-lints)."""
    from torchlint.files.discovery import discover

    if mode not in MODES + (ADD_NOQA,):
        raise ValueError(f"mode must be one of {MODES + (ADD_NOQA,)}")
    found = discover(paths, settings, force_exclude=force_exclude)
    items = [FileJob(p, settings.enabled_for(p), mode, unsafe) for p in found.files]
    if jobs <= 0:
        jobs = os.cpu_count() or 1
    if len(items) <= 1:
        jobs = 1
    from torchlint.analysis.project.imports import Budget
    from torchlint.files.project_pass import budget_warning

    budget = Budget()
    if mode == "lint":
        cache = summaries = None
        if cache_root is not None:
            from torchlint.files.cache import Cache, settings_key_for
            from torchlint.files.project_pass import summary_cache

            cache = Cache(cache_root, settings_key_for(settings), cache_dir=cache_dir)
            summaries = summary_cache(cache_root, cache_dir)
        outcomes = _lint_cached(items, mapper, jobs, cache, paths, summaries, settings, budget)
    else:
        if jobs != 1 and mapper is None:
            _preload()
        files = read_all(job.path for job in items) if any(job.enabled - _NO_ANALYSIS for job in items) else []
        with _project(_project_index(files, paths, settings=settings, budget=budget)):
            outcomes = list((mapper or _default_mapper(jobs))(process_file, items))
    warning = budget_warning(budget)
    return merge(outcomes, len(items), found.problems, (warning,) if warning is not None else ())


__all__ = ["ADD_NOQA", "FileJob", "FileOutcome", "RunResult", "merge", "process_bytes", "process_file", "run"]
