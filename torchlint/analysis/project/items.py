"""What a Dataset class's `__getitem__` does per item, from its syntax (the
project pass reads other files with `ast`): reads or decodes a file, or only
indexes data held in memory. The same reading as the loader facts make of a
same-file class (analysis/loader_datasets.py), for a class of another file."""

from __future__ import annotations

import ast
from typing import Callable, Dict, Iterator, List, Optional, Tuple, Union

from torchlint.analysis.project.handoffs import dotted
from torchlint.analysis.project.kinds import ItemWork
from torchlint.analysis.vocabulary import FILE_READERS, ITEM_PLAIN_BUILTINS, ITEM_PLAIN_CALLS, ITEM_PLAIN_METHODS

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Method = Union[ast.FunctionDef, ast.AsyncFunctionDef]


def item_work(node: ast.ClassDef, qualify: Callable[[Optional[str]], Optional[str]]) -> Optional[ItemWork]:
    """READS when `__getitem__`, or a method of the class it calls on `self`
    (two deep), calls a file reader; INDEXES when `__getitem__` calls nothing
    but tensor ops, conversions and counting builtins; None otherwise (no
    `__getitem__`, or transforms, tokenizers, other callees)."""
    methods: Dict[str, Method] = {s.name: s for s in node.body if isinstance(s, _FUNCTIONS)}
    getitem = methods.get("__getitem__")
    if getitem is None:
        return None
    if any(_reads(call, qualify) for call in _calls(getitem, methods, 2)):
        return ItemWork.READS
    if all(_plain(call, qualify) for call in _calls(getitem, methods, 0)):
        return ItemWork.INDEXES
    return None


def _calls(fn: Method, methods: Dict[str, Method], depth: int) -> Iterator[ast.Call]:
    """The calls in `fn`, and in the methods it calls on `self`, `depth` deep."""
    todo: List[Tuple[Method, int]] = [(fn, 0)]
    seen = set()
    while todo:
        current, level = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        for n in ast.walk(current):
            if not isinstance(n, ast.Call):
                continue
            yield n
            func = n.func
            if (
                level < depth
                and isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in methods
            ):
                todo.append((methods[func.attr], level + 1))


def _reads(call: ast.Call, qualify: Callable[[Optional[str]], Optional[str]]) -> bool:
    if isinstance(call.func, ast.Name) and call.func.id == "open":
        return True
    return qualify(dotted(call.func)) in FILE_READERS


def _plain(call: ast.Call, qualify: Callable[[Optional[str]], Optional[str]]) -> bool:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id in ITEM_PLAIN_BUILTINS
    q = qualify(dotted(func)) or ""
    if q.startswith("torch.") and not q.startswith(("torch.utils", "torch.load")):
        return True  # tensor ops on in-memory data
    return q in ITEM_PLAIN_CALLS or (isinstance(func, ast.Attribute) and func.attr in ITEM_PLAIN_METHODS)
