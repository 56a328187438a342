"""The pipeline's shape (docs/architecture.md): the package is a stack of
layers, each importing only the layers below it (at module level, inside
functions and under TYPE_CHECKING alike), with no import cycle; and the doors
reach the linting machinery only through torchlint.api."""

import ast
import re
from pathlib import Path
from typing import Dict, List, Optional, Set

PACKAGE = Path(__file__).resolve().parents[1] / "torchlint"
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"

# Lowest first: a module may import its own layer and the layers listed before it.
# docs/architecture.md ("Layers") says why they are in this order.
LAYERS = [
    ("base", ["torchlint", "torchlint.findings"]),  # the package (its version) and the plain data of findings
    ("source", ["torchlint.source"]),  # bytes to text to a LibCST module, text edits, suppression comments
    ("analysis", ["torchlint.analysis"]),  # the facts of one module and the project index
    ("rules", ["torchlint.rules"]),  # one judgement each, asked of the facts; the rule catalog
    ("config", ["torchlint.config"]),  # settings: which rules (by the catalog's codes) and which files
    ("report", ["torchlint.report"]),  # output formats: findings in, text out; never lints
    ("engine", ["torchlint.engine"]),  # one file's contents through the pipeline
    ("files", ["torchlint.files"]),  # runs over paths: discovery, project index, cache, pool, writes
    ("api", ["torchlint.api"]),  # the one door the others use
    ("runtime", ["torchlint.runtime"]),  # the dry run of a user's script (`torchlint run`)
    ("verify", ["torchlint.verify"]),  # fixture pairs measured on a GPU
    ("doors", ["torchlint.doors", "torchlint.server", "torchlint.__main__"]),  # cli, lsp, flake8 plugin
]
DOORS = [
    "torchlint.doors.cli",
    "torchlint.doors.server",
    "torchlint.doors.flake8_plugin",
    "torchlint.doors.lsp.server",
    "torchlint.doors.lsp.convert",
]
MACHINERY = {
    "torchlint.files.runner",
    "torchlint.engine.pipeline",
    "torchlint.engine.checker",
    "torchlint.source.parsing",
    "torchlint.engine.node_edits",
    "torchlint.engine.fix_loop",
    "torchlint.source.decode",
    "torchlint.engine.incremental",
    "torchlint.source.reparse",
    "torchlint.engine.render_cache",
}


def layer_of(module: str) -> Optional[int]:
    """The index in LAYERS of the layer that holds `module` (the longest matching
    prefix; the package `torchlint` itself matches only itself), or None."""
    best, length = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != "torchlint" and module.startswith(prefix + "."))
            if matches and len(prefix) > length:
                best, length = i, len(prefix)
    return best


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


def test_every_module_is_in_a_layer():
    assert [name for name in sorted(_modules()) if layer_of(name) is None] == []


def upward_imports(graph: Dict[str, Set[str]]) -> List[str]:
    """Each import of a module of a higher layer, as "importer (layer) -> imported (layer)"."""
    out = []
    for name in sorted(graph):
        mine = layer_of(name)
        for other in sorted(graph[name]):
            theirs = layer_of(other)
            if mine is not None and theirs is not None and theirs > mine:
                out.append(f"{name} ({LAYERS[mine][0]}) -> {other} ({LAYERS[theirs][0]})")
    return out


def test_no_module_imports_a_higher_layer():
    assert upward_imports(_imports(_modules())) == []


def test_the_layers_are_the_packages_of_the_tree():
    """Every package directly under torchlint/ is a layer (or inside one), and every
    layer but the reserved runtime holds a module."""
    modules = _modules()
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists())
    assert [p for p in packages if layer_of(f"torchlint.{p}") is None] == []
    empty = [n for i, (n, _) in enumerate(LAYERS) if n != "runtime" and not any(layer_of(m) == i for m in modules)]
    assert empty == []


def test_doors_lint_only_through_the_api():
    graph = _imports(_modules())
    for door in DOORS:
        assert not graph[door] & MACHINERY, (door, sorted(graph[door] & MACHINERY))
    assert "torchlint.api" in graph["torchlint.doors.cli"] | graph["torchlint.doors.flake8_plugin"]
    assert "torchlint.api" in graph["torchlint.doors.lsp.server"]


def test_the_architecture_page_matches_the_tree():
    """docs/architecture.md lists the layers in this order (highest first) and names
    every module of the stages (doors, files, engine, source, the analysis) and the top."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (\w+) \| `", section, re.M)
    assert rows == [name for name, _ in reversed(LAYERS)]
    named = set(re.findall(r"`([\w/]+\.py)`", text))
    wanted = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        top = rel.split("/")[0]
        if top in ("doors", "files", "engine", "source") and path.name != "__init__.py":
            wanted.append(rel)
        elif top == "analysis" and rel.count("/") == 1 and path.name != "__init__.py":
            wanted.append(path.name)
        elif "/" not in rel:
            wanted.append(rel)
    assert [w for w in wanted if w not in named] == []
