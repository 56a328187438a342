"""What a module's import statements name, as the summary records them, and
a cheap superset of those names for a file not yet summarised.

`record_import` is the one reading of an `import`/`from ... import` statement
(`summary.py` records a module's imports with it). `imported_names` parses a
text with `ast` and reads every import statement in it, at any depth, without
the summary's walk (about a fifth of its cost): the importer search
(`imports.py`) asks it before summarising a file whose import words merely
mention a run file's name (`from torch.utils.data import ...` beside a
project's `data.py`), and summarises only files one of whose imports names
a run file. The names are a superset of the summary's (which keeps the last
binding of each local name, and only module-level and function-level
imports), so no importer is lost.
"""

from __future__ import annotations

import ast
import warnings
from typing import Dict, List, Set, Tuple, Union

from torchlint.analysis.project.tree_walk import all_statements


def record_import(node: Union[ast.Import, ast.ImportFrom], imports: Dict[str, str], stars: List[str]) -> None:
    """Record `node`'s bindings: local name -> dotted name (`import a.b` binds
    `a`; `from . import x` is ".x"), and the bases of its star imports."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                imports[alias.asname] = alias.name
            else:
                root = alias.name.split(".")[0]
                imports[root] = root
        return
    base = "." * (node.level or 0) + (node.module or "")
    for alias in node.names:
        if alias.name == "*":
            stars.append(base)
            continue
        local = alias.asname or alias.name
        if base.endswith(".") or not base:
            imports[local] = base + alias.name
        else:
            imports[local] = f"{base}.{alias.name}"


def imported_names(text: str) -> Tuple[str, ...]:
    """Every dotted name any import statement of `text` binds, and every star
    import's base (sorted); none when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences and the like
            tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return ()
    names: Set[str] = set()
    for node in all_statements(tree.body):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports: Dict[str, str] = {}
            stars: List[str] = []
            record_import(node, imports, stars)
            names.update(imports.values())
            names.update(stars)
    return tuple(sorted(names))
