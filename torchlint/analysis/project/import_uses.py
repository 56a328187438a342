"""What a file takes from each of its imports, wherever they are (module level
or inside a function): the import's target as written (`pkg.mod`, `.base.Net`)
and the attributes read off the name it binds (`mod.train`), or `*` when the
name is used whole (called, passed on, returned). The project index reads it
to tell whether a definition can be reached from another file: `import bleu`
followed by no `bleu.score` never runs `bleu.score`."""

from __future__ import annotations

import ast
from typing import Dict, List, Set, Tuple

from torchlint.analysis.project.tree_walk import all_nodes

WHOLE = "*"  # the bound name is used other than by reading an attribute off it

ImportUse = Tuple[str, Tuple[str, ...]]  # (target as written, attributes read, sorted)


def _import_targets(node: ast.AST, out: List[Tuple[str, str]]) -> None:
    """(local name, target) of each name an import statement binds."""
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


def import_uses(tree: ast.Module) -> Tuple[ImportUse, ...]:
    """Every import of the file with what is read off the name it binds (one walk:
    imports, attributes read off a name, and names loaded, matched afterwards)."""
    targets: List[Tuple[str, str]] = []
    read_off: List[Tuple[str, str, int]] = []  # (name, attribute, id of the name node)
    loaded: List[ast.Name] = []
    for node in all_nodes(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loaded.append(node)
        elif isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name):
                read_off.append((node.value.id, node.attr, id(node.value)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _import_targets(node, targets)
    if not targets:
        return ()
    attrs: Dict[str, Set[str]] = {local: set() for local, _ in targets}
    bases: Set[int] = set()
    for name, attr, node_id in read_off:
        if name in attrs:
            attrs[name].add(attr)
            bases.add(node_id)
    for n in loaded:
        if n.id in attrs and id(n) not in bases:
            attrs[n.id].add(WHOLE)
    return tuple(sorted({(target, tuple(sorted(attrs[local]))) for local, target in targets}))
