"""TL000: the file cannot be analysed (it does not decode or does not parse).

The pipeline reports it from its decode and parse stages (torchlint/engine/pipeline.py),
through `SyntaxErrorRule.finding`; `check` never runs on a module, because a file
with this finding has no module. It is an ordinary rule otherwise: selected,
documented and listed like the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from torchlint.findings import Finding
from torchlint.rules.base import Invalid, Rule, RuleContext

if TYPE_CHECKING:
    from torchlint.analysis.project import FileView


class SyntaxErrorRule(Rule):
    """## What it does
    Reports a file that torchlint cannot analyse. That is Python that does not
    parse, a file whose bytes cannot be decoded (bad PEP 263 cookie, invalid
    UTF-8, NUL bytes), or a notebook (`.ipynb`) that is not valid notebook JSON.

    ## Why is this bad?
    No other rule can look at a file that does not parse, so every mistake in it
    goes unreported. The run goes on with the other files; the finding says where
    the parser stopped.

    ## Example
    ```python
    for batch in loader
        model(batch)
    ```

    ## Use instead
    ```python
    for batch in loader:
        model(batch)
    ```

    ## References
    - [Python: Syntax errors](https://docs.python.org/3/tutorial/errors.html#syntax-errors)
    - [The Jupyter notebook format](https://nbformat.readthedocs.io/en/latest/format_description.html)
    """

    CODE = "TL000"
    NAME = "syntax-error"
    MESSAGE = "The file cannot be parsed or decoded"
    # The file could not be analysed at all: an error, not a warning, and not
    # suppressible (there are no comments to read in a file that does not parse).
    SEVERITY = "error"
    VALID = ("for batch in loader:\n    model(batch)\n",)
    INVALID = (Invalid("for batch in loader\n    model(batch)\n", line=1),)

    def check(self, ctx: RuleContext) -> None:
        """A module exists, so it parsed: nothing to report."""

    @classmethod
    def may_report(cls, text: str, project: FileView) -> bool:
        """Reported by the parse stage only, never by `check`."""
        return False

    @classmethod
    def finding(cls, path: str, message: str, row: int = 1, column: int = 1) -> Finding:
        """The finding for a file that cannot be decoded or parsed, at (row, column)."""
        row, column = max(1, row), max(1, column)
        return Finding(cls.CODE, cls.NAME, message, path, row, column, row, column)
