"""Results kept on disk across server runs: reopening a file (or restarting
the editor) shows its diagnostics without linting it again.

The server's own entries in the project's results cache (`.torchlint_cache/`
next to the `pyproject.toml` with `[tool.torchlint]`, or its `cache-dir`),
keyed like the CLI's (torchlint's version and source fingerprint, the
selectors, the file's absolute path, the blake2b of its text) but in a
namespace of their own: they hold the server's `FileResult` (absolute paths),
never read by the CLI. Only files under such a project are kept; results with
problems (a crashed rule) are not kept. Reads and writes never raise.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

from torchlint.config import Settings
from torchlint.files.cache import Cache, path_variant, settings_key_for
from torchlint.findings import FileResult

NAMESPACE = "lsp:"


class DiskResults:
    def __init__(self) -> None:
        self._caches: Dict[Tuple[str, Optional[str], str], Cache] = {}

    def _cache(self, settings: Settings) -> Optional[Cache]:
        if settings.config_path is None:  # no project: nowhere that is ours to write
            return None
        key = NAMESPACE + settings_key_for(settings)
        where = (settings.root, settings.cache_dir, key)
        found = self._caches.get(where)
        if found is None:
            found = self._caches[where] = Cache(settings.root, key, cache_dir=settings.cache_dir)
        return found

    def get(self, path: str, text: str, settings: Settings) -> Optional[FileResult]:
        try:
            cache = self._cache(settings)
            value = cache.get(text.encode("utf-8", "surrogatepass"), _variant(path)) if cache is not None else None
        except Exception:
            return None
        return value if isinstance(value, FileResult) and value.path == path else None

    def put(self, path: str, text: str, settings: Settings, result: FileResult) -> None:
        if result.problems:
            return
        try:
            cache = self._cache(settings)
            if cache is not None:
                cache.put(text.encode("utf-8", "surrogatepass"), _variant(path), result)
        except Exception:
            pass


def _variant(path: str) -> str:
    """The server keeps a document's result under its own path (its diagnostics carry it)."""
    return f"{path_variant(path)}|{path}"


__all__ = ["DiskResults"]
