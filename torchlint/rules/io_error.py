"""TL001: a file torchlint found but could not read.

The runner reports it (torchlint/files/runner.py) when reading a file fails: no
permission, an I/O error, a file removed between being found and being read.
`check` never runs, since there are no contents. Like TL000 it is an ordinary
rule otherwise (selected, documented, listed) and always reported; it appears
in every output format, as Ruff reports its E902. The code is TL-namespaced
(Ruff's `E902` belongs to pycodestyle, and flake8 reports its own E902 for
files it cannot read), so `--select TL`, per-file-ignores and the reporters
treat it as torchlint's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.findings import Finding
from torchlint.rules.base import Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView


class IoErrorRule(Rule):
    """## What it does
    Reports a file that torchlint found (or that you named) but could not
    read: no read permission, an I/O error, or a file removed between being
    found and being read. Ruff reports the same as `E902`.

    ## Why is this bad?
    No rule looked at the file, so every mistake in it goes unreported; a run
    that skipped it silently would claim the file is clean. The run goes on
    with the other files, and the finding says why this one could not be read.

    ## Example
    ```console
    $ chmod a-r example.py
    ```

    ## Use instead
    ```console
    $ chmod a+r example.py
    ```
    (or exclude the file: `extend-exclude`, or `per-file-ignores` for `TL001`).
    """

    CODE = "TL001"
    NAME = "io-error"
    MESSAGE = "The file cannot be read"
    # Nothing was analysed: an error, like TL000.
    SEVERITY = "error"
    # Any contents: a file that could be read is never reported by this rule.
    VALID = ("import torch\n",)

    def check(self, ctx: RuleContext) -> None:
        """A module exists, so the file was read: nothing to report."""

    @classmethod
    def may_report(cls, text: str, project: FileView) -> bool:
        """Reported by the runner when a file cannot be read, never by `check`."""
        return False

    @classmethod
    def finding(cls, path: str, message: str) -> Finding:
        """The finding for a file that could not be read (at its first line)."""
        return Finding(cls.CODE, cls.NAME, message, path, 1, 1, 1, 1)
