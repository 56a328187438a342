"""The library API: the one way in. The CLI (and pre-commit through it), the
language server, the flake8 plugin and the tests all call these functions;
each runs the same pipeline (torchlint/engine/pipeline.py) on one file's contents, or
the runner (torchlint/files/runner.py) over paths.

Text in, text out (`lint_source`, `check`, `fix_source`) for contents already
decoded (an editor's buffer); bytes in, bytes out (`lint_bytes`, `fix_bytes`,
`process_bytes`) for a file's contents, decoded as Python does and written
back in the same encoding; `run`/`lint_paths` for files and folders. A path
ending in `.ipynb` is read as a Jupyter notebook by every one of them.
`session` is for a document that changes (an editor's buffer): its lints and
fixes equal `check`'s and `fix_source`'s, and reuse what the last ones computed.

The project: `run` reads the files it lints as one project (what a class,
decorator or function imported from another of them is). A text or bytes
function reads its input alone, unless given `project`, a `ProjectIndex`
(`project_index(paths)`, or a `Workspace`'s, kept warm by an editor).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

from torchlint.config import Settings
from torchlint.engine.outcome import MODES, FileOutcome
from torchlint.files.discovery import Discovered
from torchlint.files.runner import RunResult
from torchlint.findings import FileResult, Finding, Problem
from torchlint.source.decode import Decoded, DecodeError, decode_source

if TYPE_CHECKING:  # imports LibCST: only when a session is made
    from torchlint.analysis.project import ProjectIndex
    from torchlint.engine.incremental import Cancelled, Session  # noqa: F401
    from torchlint.files.project_pass import Workspace

__all__ = [
    "Cancelled",
    "DecodeError",
    "Decoded",
    "FileOutcome",
    "Discovered",
    "FileResult",
    "RunResult",
    "Session",
    "check",
    "decode_source",
    "discover",
    "fix_bytes",
    "fix_source",
    "lint_bytes",
    "lint_paths",
    "lint_source",
    "process_bytes",
    "project_index",
    "run",
    "session",
    "workspace",
]


def check(
    source: str, path: str = "<stdin>", settings: Optional[Settings] = None, project: Optional[ProjectIndex] = None
) -> FileResult:
    """Findings (sorted by position, each with its fix) and problems (a crashed
    rule) for source text; `project`: the index of the project it belongs to
    (None: the text alone)."""
    from torchlint.engine.pipeline import process_text

    settings = settings or Settings()
    return process_text(source, path, settings.enabled_for(path), project=project)


def lint_source(
    source: str, path: str = "<stdin>", settings: Optional[Settings] = None, project: Optional[ProjectIndex] = None
) -> List[Finding]:
    """Findings for source text, sorted by position."""
    return list(check(source, path, settings, project).findings)


def __getattr__(name: str):
    """`Session` and `Cancelled` (torchlint/engine/incremental.py), imported on first
    use: they import LibCST, which a run answered from the cache never needs."""
    if name in ("Session", "Cancelled"):
        from torchlint.engine import incremental

        return getattr(incremental, name)
    raise AttributeError(name)


def session(path: str = "<stdin>", settings: Optional[Settings] = None) -> "Session":
    """A document's lint session: `session.check(text)` and `session.fix(text)`
    equal `check(text, path, settings)` and `fix_source(...)`, and each reuses
    what the previous ones computed (incremental parse, kept results)."""
    from torchlint.engine.incremental import Session

    return Session(path, settings)


def fix_source(
    source: str,
    path: str = "<stdin>",
    settings: Optional[Settings] = None,
    unsafe: bool = False,
    project: Optional[ProjectIndex] = None,
) -> Tuple[str, List[Finding]]:
    """Apply safe (and, with `unsafe`, unsafe) fixes; return the new text and
    the findings that remain in it."""
    from torchlint.engine.pipeline import process_text

    settings = settings or Settings()
    result = process_text(source, path, settings.enabled_for(path), mode="fix", unsafe=unsafe, project=project)
    return result.fixed_source if result.fixed_source is not None else source, list(result.findings)


def process_bytes(
    data: bytes,
    path: str,
    settings: Optional[Settings] = None,
    mode: str = "lint",
    unsafe: bool = False,
    project: Optional[ProjectIndex] = None,
) -> FileOutcome:
    """Lint ("lint"), fix ("fix") or diff ("diff") contents not read from disk
    (stdin, a buffer); never writes. Undecodable input gives TL000; an internal
    error is a problem of the outcome, never an exception."""
    from torchlint.engine.pipeline import process_bytes as pipeline

    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}")
    settings = settings or Settings()
    try:
        return pipeline(data, path, settings.enabled_for(path), mode, unsafe, project=project)
    except Exception as exc:  # an internal bug on this input: a problem, as for a file
        return FileOutcome(path, problems=(Problem(path, f"internal error: {type(exc).__name__}: {exc}"),))


def lint_bytes(
    data: bytes, path: str, settings: Optional[Settings] = None, project: Optional[ProjectIndex] = None
) -> FileResult:
    """Lint raw file contents; undecodable input becomes a TL000 finding."""
    outcome = process_bytes(data, path, settings, project=project)
    return FileResult(path, outcome.findings, outcome.problems)


def fix_bytes(
    data: bytes,
    path: str = "<stdin>",
    settings: Optional[Settings] = None,
    unsafe: bool = False,
    project: Optional[ProjectIndex] = None,
) -> Tuple[bytes, List[Finding]]:
    """Fix raw file contents: the result keeps the file's encoding, BOM and line
    endings. Undecodable input is returned unchanged with its TL000, and so is
    input whose fixes the file's encoding cannot hold. The returned bytes are
    the input itself when nothing was fixed."""
    outcome = process_bytes(data, path, settings, mode="fix", unsafe=unsafe, project=project)
    return (outcome.new_data if outcome.new_data is not None else data), list(outcome.findings)


def run(
    paths: Sequence[str],
    settings: Optional[Settings] = None,
    mode: str = "lint",
    unsafe: bool = False,
    jobs: int = 1,
    force_exclude: bool = False,
    cache_root: Optional[str] = None,
    cache_dir: Optional[str] = None,
) -> RunResult:
    """Lint (mode "lint"), fix in place ("fix"), diff ("diff") or add `# noqa`
    comments in place ("add-noqa", `fixes_applied` counting them) to the
    files under `paths`: sorted findings, problems, warnings, counts, diffs.
    `jobs=0` uses every core; with `cache_root`, lint results are cached in
    `<cache_root>/.torchlint_cache`, or in `cache_dir` when given."""
    from torchlint.files.runner import run as run_files

    return run_files(
        list(paths),
        settings or Settings(),
        mode=mode,
        unsafe=unsafe,
        jobs=jobs,
        force_exclude=force_exclude,
        cache_root=cache_root,
        cache_dir=cache_dir,
    )


def discover(paths: Sequence[str], settings: Optional[Settings] = None) -> Discovered:
    """The files a run over `paths` would lint (sorted) and the problems found
    on the way (missing paths, unreadable folders), as `--show-files` lists them."""
    from torchlint.files.discovery import discover as find

    return find(list(paths), settings or Settings())


def project_index(paths: Sequence[str], settings: Optional[Settings] = None) -> ProjectIndex:
    """The project index of the files a run over `paths` would lint (for
    `check(..., project=...)` on texts that belong to that project)."""
    from torchlint.files.discovery import discover as find
    from torchlint.files.runner import _project_index, read_all

    settings = settings or Settings()
    found = find(list(paths), settings)
    return _project_index(read_all(found.files), list(paths), settings=settings)


def workspace(roots: Sequence[str], settings: Optional[Settings] = None) -> Workspace:
    """A workspace's project index kept warm for an editor: built from the files
    under `roots` on first use; `.index_for(path, text)` replaces one file's
    summary with that of its current text and returns the index."""
    from torchlint.files.project_pass import Workspace

    return Workspace(roots, settings)


def lint_paths(paths, settings: Optional[Settings] = None, fix: bool = False, unsafe: bool = False, jobs: int = 1):
    """`run` in lint mode, or with `fix` in fix mode (files fixed in place)."""
    return run(paths, settings, mode="fix" if fix else "lint", unsafe=unsafe, jobs=jobs)
