"""`workspace/executeCommand`: the commands torchlint's server offers, as
Ruff's server offers `ruff.applyAutofix` and `ruff.applyOrganizeImports`, and
their pure parts (which document an invocation names, the new text of the
organize-noqa command). No pygls here."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import AbstractSet, Any, Optional, Sequence

from torchlint.findings import Finding


class Command(str, Enum):
    # Every safe fix in the document (what source.fixAll.torchlint does).
    APPLY_AUTOFIX = "torchlint.applyAutofix"
    # A noqa comment naming the codes on every line with findings, merged into the comments
    # already there (what `torchlint --add-noqa` does).
    APPLY_ORGANIZE_NOQA = "torchlint.applyOrganizeNoqa"
    # The server's version, settings and open documents, to the log.
    PRINT_DEBUG_INFORMATION = "torchlint.printDebugInformation"


@dataclass(frozen=True)
class Target:
    """The document a command acts on, and the version it was asked for."""

    uri: str
    version: Optional[int] = None


def target_of(arguments: Sequence[Any]) -> Optional[Target]:
    """The document in a command's arguments: `[{"uri": ..., "version": ...}]`
    (Ruff's shape), `[{"textDocument": {...}}]`, or `["file:///..."]`."""
    if not arguments:
        return None
    first = arguments[0]
    if isinstance(first, str):
        return Target(first)
    if isinstance(first, dict):
        inner = first.get("textDocument", first)
        if isinstance(inner, dict) and isinstance(inner.get("uri"), str):
            version = inner.get("version")
            return Target(inner["uri"], version if isinstance(version, int) else None)
    uri = getattr(first, "uri", None)  # a structured TextDocumentIdentifier
    if isinstance(uri, str):
        return Target(uri, getattr(first, "version", None))
    return None


def organize_noqa(text: str, path: str, findings: Sequence[Finding], enabled: AbstractSet[str]) -> Optional[str]:
    """The text with a suppression comment for every finding (None: nothing to
    add). Python source uses the findings already linted; a notebook open as
    JSON goes through `--add-noqa`'s own notebook handling."""
    from torchlint.engine.add_noqa import add_noqa
    from torchlint.source.edits import apply_fix_groups
    from torchlint.source.noqa_comments import noqa_edits
    from torchlint.source.parsing import cpython_error

    if path.endswith(".ipynb"):
        result = add_noqa(text.encode("utf-8", "surrogatepass"), path, enabled)
        return result.new_data.decode("utf-8", "surrogatepass") if result.new_data is not None else None
    if any(f.code == "TL000" for f in findings):
        return None
    edits, _ = noqa_edits(text, list(findings), str)
    if not edits:
        return None
    new_text, _ = apply_fix_groups(text, [(e,) for e in edits])
    if cpython_error(new_text) is not None and cpython_error(text) is None:
        return None  # never break the code
    return new_text


__all__ = ["Command", "Target", "organize_noqa", "target_of"]
