"""The per-file pipeline behind the CLI, built from pure data so a process pool
or a cache can wrap `process_file` (jobs and outcomes are frozen dataclasses).

    FileJob --process_file--> FileOutcome      (one file: read, decode, lint/fix, write)
    run(paths, settings) --> RunResult         (discover, map over files, merge, sort)
"""
from __future__ import annotations

import difflib
import os
import stat
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from torchlint.config import Settings
from torchlint.findings import FileResult, Finding, Problem
from torchlint.fixes import write_atomic

MODES = ("lint", "fix", "diff")


@dataclass(frozen=True)
class FileJob:
    path: str
    enabled: FrozenSet[str]
    mode: str = "lint"  # lint | fix | diff
    unsafe: bool = False


@dataclass(frozen=True)
class FileOutcome:
    path: str
    findings: Tuple[Finding, ...] = ()
    problems: Tuple[Problem, ...] = ()
    fixes_applied: int = 0
    # The fixed file contents when they differ from the original (fix/diff modes);
    # dropped once written by `process_file`.
    new_data: Optional[bytes] = None
    diff: Optional[str] = None  # diff mode: the unified diff
    written: bool = False
    # Text of the lines findings point at, for code frames: ((row, text), ...).
    lines: Tuple[Tuple[int, str], ...] = ()

    @property
    def needs_write(self) -> bool:
        return self.new_data is not None and not self.written


def _lines_for(text: str, findings: Sequence[Finding]) -> Tuple[Tuple[int, str], ...]:
    rows = sorted({f.row for f in findings if f.cell is None})
    if not rows:
        return ()
    all_lines = text.splitlines()
    return tuple((r, all_lines[r - 1]) for r in rows if 0 < r <= len(all_lines))


def unified_diff(path: str, old: str, new: str) -> str:
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(old_lines, new_lines, fromfile=path, tofile=path):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _notebook(data: bytes, job: FileJob) -> FileOutcome:
    from torchlint.notebook import notebook_result

    result = notebook_result(data, job.path, job.enabled, job.mode != "lint", job.unsafe)
    findings, new_bytes, problems = result.findings, result.new_bytes, result.problems
    diff = None
    if job.mode == "diff" and new_bytes is not None and new_bytes != data:
        diff = unified_diff(job.path, data.decode("utf-8", "replace"), new_bytes.decode("utf-8", "replace"))
    changed = new_bytes is not None and new_bytes != data
    return FileOutcome(
        job.path,
        tuple(sorted(findings, key=Finding.sort_key)),
        tuple(problems),
        fixes_applied=result.fixes_applied,
        new_data=new_bytes if changed else None,
        diff=diff,
    )


def process_bytes(data: bytes, job: FileJob) -> FileOutcome:
    """Lint or fix file contents; no I/O. Undecodable input gives TL000."""
    if job.path.endswith(".ipynb"):
        return _notebook(data, job)
    # Imported here, not at module level: a run answered from the cache never
    # needs the engine (and LibCST).
    from torchlint.api import decode_error_finding, decode_source
    from torchlint.engine import check_source, fix_source, parse

    try:
        decoded = decode_source(data)
    except Exception as exc:  # any codec's failure: TL000, which is always reported
        return FileOutcome(job.path, (decode_error_finding(data, job.path, exc),))
    text = decoded.text
    if job.mode == "lint":
        result: FileResult = check_source(text, job.path, job.enabled)
        return FileOutcome(job.path, result.findings, result.problems, lines=_lines_for(text, result.findings))
    result = fix_source(text, job.path, job.enabled, unsafe=job.unsafe)
    new_text = result.fixed_source if result.fixed_source is not None else text
    problems = list(result.problems)
    new_data: Optional[bytes] = None
    if new_text != text:
        try:
            parse(new_text)  # belt and braces: never hand back code that does not parse
            new_data = decoded.encode(new_text)
        except UnicodeEncodeError as exc:
            problems.append(Problem(job.path, f"fixed code cannot be encoded as {decoded.encoding}: {exc.reason}; not fixed"))
        except Exception:
            problems.append(Problem(job.path, "fixed code does not parse; not fixed"))
    if new_data is None:  # nothing (valid) to apply: report the original findings
        if new_text != text:
            result = check_source(text, job.path, job.enabled)
        return FileOutcome(job.path, result.findings, tuple(problems), lines=_lines_for(text, result.findings))
    diff = unified_diff(job.path, text, new_text) if job.mode == "diff" else None
    return FileOutcome(
        job.path,
        result.findings,
        tuple(problems),
        fixes_applied=result.fixes_applied,
        new_data=new_data,
        diff=diff,
        lines=_lines_for(new_text, result.findings),
    )


def _read(path: str) -> Tuple[Optional[bytes], Optional[Problem]]:
    try:
        with open(path, "rb") as fh:
            return fh.read(), None
    except FileNotFoundError:
        return None, Problem(path, "file vanished before it could be read")
    except IsADirectoryError:
        return None, Problem(path, "is a directory, not a file")
    except OSError as exc:
        return None, Problem(path, f"cannot read file: {exc.strerror or exc}")


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


def process_file(job: FileJob) -> FileOutcome:
    """Read one file, lint or fix it; in fix mode write the result atomically."""
    data, problem = _read(job.path)
    if data is None:
        return FileOutcome(job.path, problems=(problem,) if problem else ())
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
    lines: Dict[Tuple[str, int], str] = field(default_factory=dict, compare=False)
    outcomes: Tuple[FileOutcome, ...] = field(default=(), compare=False)


Mapper = Callable[[Callable, List], Iterable]


def _default_mapper(jobs: int, weights: Optional[Sequence[int]] = None) -> Mapper:
    """A process pool across files (torchlint.parallel decides when one pays)."""
    if jobs == 1:
        return lambda fn, items: [fn(item) for item in items]
    from torchlint.parallel import parallel_map

    return lambda fn, items: parallel_map(fn, items, jobs, weights=weights)


def _lint_read(item: Tuple[FileJob, bytes]) -> FileOutcome:
    """Lint contents the parent already read (and looked up in the cache)."""
    job, data = item
    try:
        return process_bytes(data, job)
    except Exception as exc:  # an internal bug on one file must not stop the run
        return FileOutcome(job.path, problems=(Problem(job.path, f"internal error: {type(exc).__name__}: {exc}"),))


def _preload() -> None:
    """Import LibCST and the rules once, before forking workers, so that each
    worker does not import them again."""
    from torchlint.rules import all_rules

    all_rules()


def _lint_cached(items: List[FileJob], mapper: Optional[Mapper], jobs: int, cache) -> List[FileOutcome]:
    """Lint mode with the cache: read each file once, answer hits from the cache,
    lint the misses (in a pool when it pays), store results without problems."""
    outcomes: List[Optional[FileOutcome]] = [None] * len(items)
    todo: List[Tuple[int, bytes]] = []
    for i, job in enumerate(items):
        data, problem = _read(job.path)
        if data is None:
            outcomes[i] = FileOutcome(job.path, problems=(problem,) if problem else ())
            continue
        hit = cache.get(job.path, data) if cache is not None else None
        if isinstance(hit, FileOutcome):
            outcomes[i] = hit
        else:
            todo.append((i, data))
    if todo:
        _preload()
        work = [(items[i], data) for i, data in todo]
        done = (mapper or _default_mapper(jobs, [len(d) for _, d in todo]))(_lint_read, work)
        where = {items[i].path: (i, data) for i, data in todo}
        for out in done:  # matched by path: a mapper need not keep the order
            i, data = where[out.path]
            outcomes[i] = out
            # Results with problems (a crashed rule) are not cached: the next run retries.
            if cache is not None and not out.problems:
                cache.put(items[i].path, data, out)
    return outcomes  # type: ignore[return-value]


def merge(outcomes: Sequence[FileOutcome], files: int, extra_problems: Sequence[Problem] = ()) -> RunResult:
    findings: List[Finding] = []
    problems: List[Problem] = list(extra_problems)
    lines: Dict[Tuple[str, int], str] = {}
    diffs = []
    fixed = 0
    for out in outcomes:
        findings.extend(out.findings)
        problems.extend(out.problems)
        fixed += out.fixes_applied
        if out.diff:
            diffs.append((out.path, out.diff))
        for row, text in out.lines:
            lines[(out.path, row)] = text
    findings.sort(key=Finding.sort_key)
    problems.sort(key=lambda p: (p.path, p.rule or "", p.message))
    diffs.sort()
    return RunResult(tuple(findings), tuple(problems), files, fixed, tuple(diffs), lines, tuple(outcomes))


def run(
    paths: Sequence[str],
    settings: Settings,
    mode: str = "lint",
    unsafe: bool = False,
    jobs: int = 1,
    force_exclude: bool = False,
    mapper: Optional[Mapper] = None,
    cache_root: Optional[str] = None,
) -> RunResult:
    """Discover files under `paths` and lint (or fix, or diff) each one.

    With `cache_root`, lint results are cached in `<cache_root>/.torchlint_cache`
    (fixing always re-reads and re-lints)."""
    from torchlint.discovery import discover

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    found = discover(paths, settings, force_exclude=force_exclude)
    items = [FileJob(p, settings.enabled_for(p), mode, unsafe) for p in found.files]
    if jobs <= 0:
        jobs = os.cpu_count() or 1
    if len(items) <= 1:
        jobs = 1
    if mode == "lint":
        cache = None
        if cache_root is not None:
            from torchlint.cache import Cache, settings_key_for

            cache = Cache(cache_root, settings_key_for(settings))
        outcomes = _lint_cached(items, mapper, jobs, cache)
    else:
        if jobs != 1 and mapper is None:
            _preload()
        outcomes = list((mapper or _default_mapper(jobs))(process_file, items))
    return merge(outcomes, len(items), found.problems)


def run_source(data: bytes, path: str, settings: Settings, mode: str = "lint", unsafe: bool = False) -> FileOutcome:
    """Lint or fix contents that are not read from disk (stdin); never writes."""
    job = FileJob(path, settings.enabled_for(path), mode, unsafe)
    try:
        return process_bytes(data, job)
    except Exception as exc:
        return FileOutcome(path, problems=(Problem(path, f"internal error: {type(exc).__name__}: {exc}"),))


__all__ = [
    "FileJob", "FileOutcome", "RunResult", "process_bytes", "process_file", "run", "run_source",
    "unified_diff", "merge",
]
