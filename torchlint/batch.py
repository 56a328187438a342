"""Lint many files: the cache first, then a process pool for the misses.

`lint_many(paths, settings, jobs=0, cache_root=...)` is what a runner needs
between discovery and reporting: it returns one `FileResult` per path, in the
order given, whatever the number of workers. It reads each file once (bytes),
looks it up in the cache (`torchlint.cache`), lints the misses with
`torchlint.parallel.parallel_map` (the worker gets the bytes, not the path, so
files are not read twice), and stores the new results.

LibCST and the rules are imported only when some file has to be linted, so a
run whose every file is cached does not pay for them.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

from torchlint.findings import FileResult, Problem


def _work(item: Tuple[str, bytes, object, bool, bool]) -> FileResult:
    """Lint (or fix) one file's bytes. Module-level, so a spawned worker can run it."""
    path, data, settings, fix, unsafe = item
    from torchlint import api
    from torchlint.engine import fix_source

    if not fix:
        return api.lint_bytes(data, path, settings)
    try:
        decoded = api.decode_source(data)
    except (UnicodeDecodeError, SyntaxError, LookupError):
        return api.lint_bytes(data, path, settings)  # the TL000 finding
    return fix_source(decoded.text, path, settings.enabled_for(path), unsafe=unsafe)


def lint_many(
    paths: Sequence[str],
    settings,
    jobs: Optional[int] = 0,
    cache_root: Optional[Union[str, Path]] = None,
    fix: bool = False,
    unsafe: bool = False,
) -> List[FileResult]:
    """One FileResult per path, in order. `cache_root=None` disables the cache
    (`--no-cache`). A file that cannot be read gives a FileResult with a Problem."""
    from torchlint.parallel import parallel_map

    cache = None
    if cache_root is not None:
        from torchlint.cache import Cache, settings_key_for

        cache = Cache(cache_root, settings_key_for(settings, fix=fix, unsafe=unsafe))
    results: List[Optional[FileResult]] = [None] * len(paths)
    todo: List[int] = []
    contents: List[Optional[bytes]] = [None] * len(paths)
    for i, path in enumerate(paths):
        try:
            contents[i] = Path(path).read_bytes()
        except OSError as exc:
            results[i] = FileResult(path, (), (Problem(path, f"cannot read file: {exc.strerror or exc}"),))
            continue
        hit = cache.get(path, contents[i]) if cache is not None else None
        if hit is not None:
            results[i] = hit
        else:
            todo.append(i)
    if todo:
        # Import LibCST and the rules once here, so that forked workers inherit
        # them instead of each importing them again (about 0.3 s of CPU each).
        from torchlint import api  # noqa: F401
        from torchlint.rules import all_rules

        all_rules()
    items = [(paths[i], contents[i], settings, fix, unsafe) for i in todo]
    done = parallel_map(_work, items, jobs, weights=[len(contents[i]) for i in todo])
    for i, res in zip(todo, done):
        results[i] = res
        # Results with problems (a crashed rule) are not cached: the next run retries.
        if cache is not None and not res.problems:
            cache.put(paths[i], contents[i], res)
    return results  # type: ignore[return-value]


def cache_root_for(settings) -> str:
    """The project root for the cache: `settings.root`, i.e. the folder of the
    pyproject.toml that configured the run, else the current folder."""
    return os.path.abspath(settings.root)
