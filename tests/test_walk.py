"""The fast read-only walk (torchlint.analysis.walk) must give the facts
collector exactly what LibCST's own `CSTNode.visit` gives it."""

from __future__ import annotations

import bisect
import importlib.util
from pathlib import Path

import libcst as cst
import pytest

from torchlint.analysis import collect as collect_mod
from torchlint.analysis import facts as facts_mod
from torchlint.analysis.walk import child_fields, children, nodes_of, walk
from torchlint.rules import all_rules

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "tests" / "data" / "seeds" / "blocks"

TRICKY = """
import torch as T, os.path
from torch.utils.data import DataLoader as DL
from . import sibling
@T.no_grad()
@decorate(x=1)
async def f(a, /, b: int = 2, *args, c=T.zeros(3), **kw) -> T.Tensor:
    async with T.autocast("cuda") as ctx, open(p) as (q, r):
        async for i, (x, y) in DL(ds):
            z = [w for w in x if w] + {k: v for k, v in kw.items()}
            print(f"{x!r:>{width}} {y=}", *args, **kw)
            (n := len(x))
            x[1:2, ...] += 1 if y else -1
    while not done:
        try:
            g = lambda q, *r: q @ r
        except (ValueError, KeyError) as e:
            raise RuntimeError("bad") from e
        else:
            break
        finally:
            del g
class M(T.nn.Module, metaclass=Meta):
    w: int = 3
    def forward(self, x):
        global G
        nonlocal_thing = yield from x
        return await x if x else (yield)
match cmd:
    case [1, *rest] if rest:
        pass
    case {"k": v, **others}:
        pass
    case Point(x=0) | None:
        pass
t = "\\x00" "implicit" 'concat'
assert x, "msg"
type Alias = list[int]
def generic[T](x: T) -> T: return x
"""


def _sources():
    out = [("tricky", TRICKY)]
    for p in sorted(SEEDS.glob("*.py")):
        out.append((p.name, p.read_text(encoding="utf-8")))
    for rule in all_rules():
        for i, src in enumerate(rule.VALID):
            out.append((f"{rule.CODE}-valid-{i}", src))
        for i, inv in enumerate(rule.INVALID):
            out.append((f"{rule.CODE}-invalid-{i}", inv.code))
    spec = importlib.util.find_spec("libcst")
    if spec and spec.origin:  # some real, varied code without importing anything heavy
        small = [p for p in sorted(Path(spec.origin).parent.glob("_nodes/*.py")) if p.stat().st_size < 30_000]
        for p in small[:4]:
            out.append((p.name, p.read_text(encoding="utf-8")))
    parseable = []
    for name, src in out:  # unparseable examples (TL000) have no facts to compare
        try:
            cst.parse_module(src)
        except cst.ParserSyntaxError:
            continue
        parseable.append((name, src))
    return parseable


class _Recorder(cst.CSTVisitor):
    def __init__(self):
        self.events = []

    def on_visit(self, node):
        self.events.append(("visit", type(node).__name__, id(node)))
        return True

    def on_leave(self, original_node):
        self.events.append(("leave", type(original_node).__name__, id(original_node)))


def _normalise(f: facts_mod.Facts):
    """A comparable picture of the facts; orders become ranks among site orders."""
    sites = []

    def s(site):
        sites.append(site)
        return site

    for c in f.calls:
        s(c.site)
    for b in f.bindings:
        s(b.site)
    for u in f.uses:
        s(u.site)
    for _, site in f.withs + f.strings + f.ifs + f.statements:
        s(site)
    orders = sorted({x.order for x in sites} | {lp.order for lp in f.loops})

    def rank(o):
        return bisect.bisect_right(orders, o)

    def site(x):
        return (
            x.scope.name,
            x.scope.kind,
            id(x.loop.node) if x.loop else None,
            tuple(map(id, x.withs)),
            id(x.stmt),
            id(x.parent),
            rank(x.order),
            tuple(map(id, x.ifs)),
        )

    return {
        "aliases": dict(f.aliases),
        "shadowed": {k: id(v) for k, v in f.shadowed.items()},
        "calls": [(id(c.node), site(c.site), c.qualname, c.method) for c in f.calls],
        "bindings": [(b.name, id(b.value), id(b.target), site(b.site), b.kind, b.index) for b in f.bindings],
        "uses": [(id(u.node), site(u.site)) for u in f.uses],
        "loops": [
            (id(lp.node), rank(lp.order), rank(lp.end_order), lp.targets, id(lp.parent.node) if lp.parent else None)
            for lp in f.loops
        ],
        "functions": [(id(fn.node), fn.name, fn.params) for fn in f.functions],
        "classes": {k: (id(v.node), site(v.site)) for k, v in f.classes.items()},
        "withs": [(id(w), site(x)) for w, x in f.withs],
        "strings": [(id(w), site(x)) for w, x in f.strings],
        "ifs": [(id(w), site(x)) for w, x in f.ifs],
        "statements": [(id(w), site(x)) for w, x in f.statements],
    }


SOURCES = _sources()


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_fast_walk_gives_identical_facts(name, source):
    module = cst.parse_module(source)
    slow = facts_mod.Facts(module)
    module.visit(collect_mod._Collector(slow))
    fast = facts_mod.Facts(module)
    walk(module, collect_mod._Collector(fast))
    assert _normalise(fast) == _normalise(slow)


@pytest.mark.parametrize("name,source", SOURCES[:1] + SOURCES[-2:], ids=["tricky", "a", "b"])
def test_walk_visits_the_same_non_token_nodes_in_the_same_order(name, source):
    module = cst.parse_module(source)
    from torchlint.analysis.walk import TOKEN_TYPES

    slow, fast = _Recorder(), _Recorder()
    module.visit(slow)
    walk(module, fast)
    keep = [e for e in slow.events if not any(t.__name__ == e[1] for t in TOKEN_TYPES)]
    assert fast.events == keep


def test_a_visitor_that_asks_for_a_token_type_gets_it():
    class Commas(cst.CSTVisitor):
        def __init__(self):
            self.n = 0

        def visit_Comma(self, node):
            self.n += 1

    v = Commas()
    walk(cst.parse_module("f(a, b, c)\nx = [1, 2]\n"), v)
    assert v.n == 3


def test_returning_false_skips_children():
    class NoCalls(cst.CSTVisitor):
        def __init__(self):
            self.names = []

        def visit_Call(self, node):
            return False

        def visit_Name(self, node):
            self.names.append(node.value)

    v = NoCalls()
    walk(cst.parse_module("x = f(y)\nz = w\n"), v)
    assert v.names == ["x", "z", "w"]


def test_child_fields_follow_source_order():
    fn = cst.parse_module("@d\ndef f(a) -> int: pass\n").body[0]
    names = child_fields(fn)
    assert (
        names.index("decorators")
        < names.index("name")
        < names.index("params")
        < names.index("returns")
        < names.index("body")
    )


def test_field_order_does_not_depend_on_the_first_instance_seen():
    # The first f-string expression seen has no format spec; a later one has one
    # holding a nested expression, which must still be visited.
    from torchlint.analysis import walk as walk_mod

    walk_mod._FIELDS.pop(cst.FormattedStringExpression, None)
    module = cst.parse_module('a = f"{x}"\nb = f"{y:>{width}}"\n')
    names = []

    class Names(cst.CSTVisitor):
        def visit_Name(self, node):
            names.append(node.value)

    walk(module, Names())
    assert names == ["a", "x", "b", "y", "width"]


@pytest.mark.parametrize("name,source", SOURCES, ids=[n for n, _ in SOURCES])
def test_children_read_from_fields_equal_libcsts_children(name, source):
    """`walk.children` (what `descendants` follows) is LibCST's `children`
    property, node for node, without rebuilding each node."""
    stack = [cst.parse_module(source)]
    seen = 0
    while stack:
        node = stack.pop()
        expected = list(node.children)
        got = children(node)
        assert len(got) == len(expected), type(node).__name__
        assert all(a is b for a, b in zip(got, expected)), type(node).__name__
        stack.extend(expected)
        seen += 1
    assert seen > 1


def test_nodes_of_finds_every_node_of_the_types_in_source_order():
    module = cst.parse_module(TRICKY)
    wanted = (cst.Call, cst.Assign, cst.Arg)
    expected = [n for n in _preorder(module) if isinstance(n, wanted)]
    got = nodes_of(module, wanted)
    assert got and len(got) == len(expected)
    assert all(a is b for a, b in zip(got, expected))


def _preorder(node):
    yield node
    for child in node.children:
        yield from _preorder(child)
