"""The hook for a project index: what the server keeps warm across files.

There is no project-wide analysis yet: torchlint's facts are per file (see
docs/architecture.md). When the analysis gains a project pass (classes and
function summaries across modules, cached by content hash), its index plugs in
here: the server calls `warm` once after `initialized` (on its lint thread,
before any file is linted, so the first lint finds it ready), `changed` for
every text it lints (the open buffer is newer than the file on disk) and
`closed` when a buffer closes (the file on disk is the truth again). Linting a
file will then read from the index; until then `NoIndex` does nothing.
"""

from __future__ import annotations

from typing import Optional, Protocol, Sequence


class ProjectIndex(Protocol):
    def warm(self, roots: Sequence[str]) -> None:
        """Build or load the index for these workspace folders."""
        ...

    def changed(self, path: Optional[str], text: str) -> None:
        """An open buffer's text (newer than the file on disk)."""
        ...

    def closed(self, path: Optional[str]) -> None:
        """A buffer closed: the file on disk is current again."""
        ...


class NoIndex:
    """No project pass exists yet: nothing to keep."""

    def warm(self, roots: Sequence[str]) -> None:
        pass

    def changed(self, path: Optional[str], text: str) -> None:
        pass

    def closed(self, path: Optional[str]) -> None:
        pass


def warm_imports() -> None:
    """Import what a lint needs (LibCST, the pipeline, every rule) so that the
    first file opened is not also the one that pays for the imports."""
    from torchlint.api import session
    from torchlint.rules import all_rules

    all_rules()
    session("warm.py").check("import torch\nx = torch.zeros(1)\n")


__all__ = ["NoIndex", "ProjectIndex", "warm_imports"]
