"""Running the user's code as `python` would, like `coverage run` does.

- a script: `sys.argv` is `[script, *args]`, the script's folder is
  `sys.path[0]`, it runs as `__main__` (a fresh module in `sys.modules`,
  so pickling its classes works), compiled under its own path; the current
  folder is left as it is;
- `-m module`: as `python -m` (the current folder on `sys.path`, the
  module's file as `sys.argv[0]`), through `runpy`;
- a notebook: its code cells in order, as "Run All", in one namespace.
  With IPython installed each cell goes through IPython's input
  transformations (`%magic`, `!cmd`), run in an `InteractiveShell` whose
  shell escapes, `%pip`, `%conda` and `%matplotlib` do nothing; without it,
  IPython lines are blanked as `torchlint check` reads them. Cells whose
  magic is not Python (`%%bash`) are skipped. Each cell is compiled under a
  name of its own, mapped back to (notebook, cell) for the sites.

Afterwards `sys.argv`, `sys.path`, `sys.modules["__main__"]` are restored,
and the modules imported from the user's folders are forgotten, so a
second run in the same process imports them afresh.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.util
import json
import linecache
import os
import runpy
import signal
import sys
import threading
import tokenize
import types
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from torchlint.runtime.sites import UserFiles


@dataclass(frozen=True)
class Target:
    """What to run: kind "script" (a path), "module" (a dotted name) or "notebook" (a path)."""

    kind: str
    name: str
    argv: Tuple[str, ...] = ()

    @staticmethod
    def of(name: str, argv: Tuple[str, ...] = (), module: bool = False) -> "Target":
        if module:
            return Target("module", name, argv)
        kind = "notebook" if name.endswith(".ipynb") else "script"
        return Target(kind, os.path.abspath(name), argv)

    def roots(self) -> List[str]:
        """The folders whose files are the user's."""
        if self.kind != "module":
            return [os.path.dirname(self.name)]
        roots = [os.getcwd()]
        origin = _module_origin(self.name)
        if origin is not None:
            roots.append(os.path.dirname(origin))
        return roots


def _module_origin(name: str) -> Optional[str]:
    """The file `python -m name` runs (finding it imports its parent packages:
    they are forgotten again, so the run imports them afresh)."""
    before = set(sys.modules)
    sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        sys.path.pop(0)
        for added in [m for m in sys.modules if m not in before]:
            del sys.modules[added]
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        return None
    if spec.submodule_search_locations:  # a package: its __main__
        main = os.path.join(os.path.dirname(spec.origin), "__main__.py")
        return main if os.path.exists(main) else spec.origin
    return spec.origin


@contextlib.contextmanager
def prepared(target: Target, files: UserFiles) -> Iterator[List[str]]:
    """sys.argv, sys.path and __main__ as the target expects, restored
    afterwards; yields a list that gets the files of the user's modules the
    run imported."""
    argv, path, main = sys.argv[:], sys.path[:], sys.modules.get("__main__")
    cwd, environ, streams = os.getcwd(), dict(os.environ), (sys.stdout, sys.stderr, sys.stdin)
    interrupt = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    before = set(sys.modules)
    if target.kind == "module":
        sys.argv = [target.name, *target.argv]
        sys.path.insert(0, os.getcwd())
    else:
        sys.argv = [target.name, *target.argv]
        sys.path.insert(0, os.path.dirname(target.name))
    imported: List[str] = []
    try:
        yield imported
    finally:
        sys.argv = argv
        sys.path[:] = path
        sys.stdout, sys.stderr, sys.stdin = streams
        with contextlib.suppress(OSError):
            os.chdir(cwd)
        if os.environ != environ:
            os.environ.clear()
            os.environ.update(environ)
        if interrupt is not None:
            signal.signal(signal.SIGINT, interrupt)
        if main is not None:
            sys.modules["__main__"] = main
        for name in [n for n in sys.modules if n not in before]:
            module = sys.modules.get(name)
            filename = getattr(module, "__file__", None)
            if isinstance(filename, str) and files.place(filename) is not None:
                imported.append(os.path.abspath(filename))
                del sys.modules[name]


def execute(target: Target, files: UserFiles) -> None:
    """Run the target; what it raises (SystemExit included) propagates."""
    if target.kind == "script":
        run_script(target.name)
    elif target.kind == "module":
        runpy.run_module(target.name, run_name="__main__", alter_sys=True)
    else:
        run_notebook(target.name, files)


def run_script(path: str) -> None:
    with tokenize.open(path) as fh:
        source = fh.read()
    code = compile(source, path, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__spec__ = None
    main.__loader__ = None
    main.__cached__ = None  # type: ignore[attr-defined]
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


# -- notebooks -----------------------------------------------------------------------------------------


def notebook_cells(path: str) -> List[Tuple[int, str]]:
    """(cell number, source) of each code cell; numbers count every cell, as `check` does."""
    with open(path, "rb") as fh:
        nb = json.loads(fh.read().decode("utf-8-sig"))
    cells = []
    for number, cell in enumerate(nb.get("cells", []), 1):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        cells.append((number, "".join(source) if isinstance(source, list) else str(source)))
    return cells


def _skipped(source: str) -> bool:
    """A cell whose magic is not Python (`%%bash`, `%%writefile`): it does nothing here."""
    from torchlint.source.notebook import PYTHON_CELL_MAGICS, cell_magic

    first = next((line for line in source.splitlines() if line.strip()), "")
    magic = cell_magic(first)
    return magic is not None and magic not in PYTHON_CELL_MAGICS


def _python_cell_magic(source: str) -> bool:
    """A cell magic that runs its body as Python (`%%time`, `%%capture`, `%%timeit`)."""
    from torchlint.source.notebook import PYTHON_CELL_MAGICS, cell_magic

    first = source.split("\n", 1)[0]
    return cell_magic(first) in PYTHON_CELL_MAGICS


_QUIET_MAGICS = frozenset({"matplotlib", "pip", "conda", "load_ext", "config", "gui"})


def _shell() -> Optional[Any]:
    try:
        from IPython.core.interactiveshell import InteractiveShell
    except ImportError:
        return None
    shell: Any = InteractiveShell.instance(colors="nocolor")
    shell.system = lambda *a, **k: None  # `!pip install ...`: nothing runs
    shell.getoutput = lambda *a, **k: []
    shell.enable_gui = lambda *a, **k: None
    run_line_magic = shell.run_line_magic

    def line_magic(name: str, line: str, _stack_depth: int = 1) -> Any:
        if name in _QUIET_MAGICS:
            return None
        return run_line_magic(name, line, _stack_depth + 1)

    shell.run_line_magic = line_magic
    return shell


def _plain_cells(path: str) -> Dict[int, str]:
    """Cells as Python, IPython lines blanked (torchlint.source.notebook), by cell number."""
    from torchlint.source import notebook

    with open(path, "rb") as fh:
        cells = notebook.read(fh.read())
    return {c.number: c.text for c in cells.cells} if cells is not None else {}


def run_notebook(path: str, files: UserFiles) -> None:
    shell = _shell()
    namespace: Dict[str, Any]
    if shell is not None:
        namespace = shell.user_ns
        namespace["__name__"] = "__main__"
        plain: Dict[int, str] = {}
    else:
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        plain = _plain_cells(path)
    try:
        for number, source in notebook_cells(path):
            if _skipped(source):
                continue
            if _python_cell_magic(source):  # `%%time`: its body runs once, at its own lines
                first, _, body = source.partition("\n")
                text = "pass\n" + body  # a line of its own, which IPython does not strip as it strips blank ones
                text = shell.transform_cell(text) if shell is not None else plain.get(number, text)
            else:
                text = shell.transform_cell(source) if shell is not None else plain.get(number, source)
            filename = f"<torchlint-cell-{number}:{os.path.basename(path)}>"
            lines = source.splitlines(keepends=True)
            linecache.cache[filename] = (len(source), None, lines, filename)
            files.add_cell(filename, os.path.abspath(path), number)
            code = compile(text, filename, "exec", dont_inherit=True)
            exec(code, namespace)
    finally:
        if shell is not None:
            from IPython.core.interactiveshell import InteractiveShell

            InteractiveShell.clear_instance()
