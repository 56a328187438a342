"""What a file takes from each of its imports, wherever they are (module level
or inside a function): the import's target as written (`pkg.mod`, `.base.Net`)
and the attributes read off the name it binds (`mod.train`), or `*` when the
name is used whole (called, passed on, returned). The project index reads it
to tell whether a definition can be reached from another file: `import bleu`
followed by no `bleu.score` never runs `bleu.score`."""

from __future__ import annotations

import ast
from typing import Dict, List, Set, Tuple

WHOLE = "*"  # the bound name is used other than by reading an attribute off it

ImportUse = Tuple[str, Tuple[str, ...]]  # (target as written, attributes read, sorted)


def _targets(tree: ast.Module) -> List[Tuple[str, str]]:
    """(local name, target) of every import in the file."""
    out: List[Tuple[str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    out.append((alias.asname, alias.name))
                else:
                    root = alias.name.split(".")[0]
                    out.append((root, root))
        elif isinstance(node, ast.ImportFrom):
            base = "." * (node.level or 0) + (node.module or "")
            for alias in node.names:
                if alias.name == "*":
                    continue
                local = alias.asname or alias.name
                target = base + alias.name if base.endswith(".") or not base else f"{base}.{alias.name}"
                out.append((local, target))
    return out


def import_uses(tree: ast.Module) -> Tuple[ImportUse, ...]:
    """Every import of the file with what is read off the name it binds."""
    targets = _targets(tree)
    if not targets:
        return ()
    locals_ = {local for local, _ in targets}
    attrs: Dict[str, Set[str]] = {local: set() for local in locals_}
    bases: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in locals_:
            attrs[node.value.id].add(node.attr)
            bases.add(id(node.value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in locals_ and id(node) not in bases:
            if isinstance(node.ctx, ast.Load):
                attrs[node.id].add(WHOLE)
    return tuple(sorted({(target, tuple(sorted(attrs[local]))) for local, target in targets}))
