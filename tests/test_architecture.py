"""The pipeline's shape (docs/architecture.md): imports go one way, and the
doors reach the linting machinery only through torchlint.api."""

import ast
from pathlib import Path
from typing import Dict, List, Set

PACKAGE = Path(__file__).resolve().parents[1] / "torchlint"
DOORS = [
    "torchlint.cli",
    "torchlint.server",
    "torchlint.flake8_plugin",
    "torchlint.lsp.server",
    "torchlint.lsp.convert",
]
MACHINERY = {
    "torchlint.runner",
    "torchlint.pipeline",
    "torchlint.checker",
    "torchlint.parsing",
    "torchlint.node_edits",
    "torchlint.fix_loop",
    "torchlint.decode",
    "torchlint.incremental",
    "torchlint.reparse",
    "torchlint.render_cache",
}


def _modules() -> Dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(modules: Dict[str, Path]) -> Dict[str, Set[str]]:
    """Every torchlint module each module imports, at module level or inside functions."""
    graph: Dict[str, Set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rsplit(".", 1)[0] if "." in target else ""
                if target and target != name:
                    found.add(target)
        graph[name] = found
    return graph


def test_no_import_cycle():
    graph = _imports(_modules())
    done: Set[str] = set()

    def visit(name: str, path: List[str]) -> None:
        if name in path:
            cycle = path[path.index(name) :] + [name]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, path + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_doors_lint_only_through_the_api():
    graph = _imports(_modules())
    for door in DOORS:
        assert not graph[door] & MACHINERY, (door, sorted(graph[door] & MACHINERY))
    assert "torchlint.api" in graph["torchlint.cli"] | graph["torchlint.flake8_plugin"]
    assert "torchlint.api" in graph["torchlint.lsp.server"]
