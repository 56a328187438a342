"""The workspace as one project, for the server (torchlint/analysis/project/).

The server keeps one `WorkspaceProject`: `warm` builds the index from the
workspace folders' files once after `initialized` (on the lint thread, before
any document is linted); `index_for` gives the index with an open buffer's
text in place of its file on disk (the buffer is newer), for each lint;
`closed` puts the file on disk back when its buffer closes. A lint reads the
index it is given; a document's session drops its kept lints when the index
changes (torchlint/engine/incremental.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:
    from torchlint.analysis.project import ProjectIndex
    from torchlint.files.project_pass import Workspace


class WorkspaceProject:
    """The workspace's project index, kept warm across documents. Thread-safe."""

    def __init__(self) -> None:
        self._workspace: Optional["Workspace"] = None
        self._lock = threading.Lock()

    def warm(self, roots: Sequence[str]) -> None:
        """Build the index from the files under the workspace folders `roots`."""
        from torchlint.api import workspace

        found = workspace([r for r in roots if r])
        found.index_for(None, "")
        with self._lock:
            self._workspace = found

    def index_for(self, path: Optional[str], text: str) -> "ProjectIndex":
        """The index with file `path` as `text` (an open buffer); an index of
        open buffers only when the server has no workspace folder."""
        with self._lock:
            if self._workspace is None:
                from torchlint.api import workspace

                self._workspace = workspace(())
            found = self._workspace
        return found.index_for(path, text)

    def closed(self, path: Optional[str]) -> None:
        """A buffer closed: the file on disk counts again (when it can be read)."""
        with self._lock:
            found = self._workspace
        if found is None or path is None:
            return
        try:
            with open(path, "rb") as fh:
                text = fh.read().decode("utf-8", "surrogateescape")
        except OSError:
            return
        found.index_for(path, text)


def warm_imports() -> None:
    """Import what a lint needs (LibCST, the pipeline, every rule) so that the
    first file opened is not also the one that pays for the imports."""
    from torchlint.api import session
    from torchlint.rules import all_rules

    all_rules()
    session("warm.py").check("import torch\nx = torch.zeros(1)\n")


__all__ = ["WorkspaceProject", "warm_imports"]
