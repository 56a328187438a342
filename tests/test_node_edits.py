"""Fix edits built from the replaced nodes alone (torchlint/engine/node_edits.py) are
exactly those of the whole-module transform, and statement-level fixes take
the local path too (what makes fixing a big file linear)."""

import inspect

import libcst as cst
import pytest

from torchlint.engine import node_edits, pipeline
from torchlint.rules import all_codes, all_rules
from torchlint.source.edits import apply_edits

from helpers import repo_sources, training_script

ALL = frozenset(all_codes())

EXTRA = [
    (
        "nested-indent",
        "import torch\nif x:\n    def f():\n        y = torch.zeros(\n            4,\n        ).cuda()\n",
    ),
    ("continued-expr", "import torch\nx = (torch.zeros(2)\n     .to('cuda'))\n"),
    (
        "tabs",
        "import torch\ndevice = 'cuda'\ndef f(loader, model):\n\tfor x, y in loader:\n\t\tmodel(x)\n\t\tx.cuda()\n",
    ),
    ("crlf", "import torch\r\ndevice = torch.device('cuda')\r\nx = torch.zeros(3).to(device)\r\nx.cuda()\r\n"),
    ("semicolons", "import torch\nx = torch.zeros(2); x.cuda(); y = 1\nx.cuda(); z = 2\n"),
]


def _sources():
    out = list(EXTRA) + repo_sources()
    for rule in all_rules():
        out += [(f"{rule.CODE}-invalid-{i}", ex.code) for i, ex in enumerate(rule.INVALID)]
    return out


SOURCES = _sources()
# Rules whose fixes insert, wrap or decorate statements.
STATEMENT_LEVEL = {"TL100", "TL103", "TL201"}


def _transform_only(monkeypatch):
    monkeypatch.setattr(pipeline, "fix_edits", lambda *args: None)


@pytest.fixture(scope="module")
def local_results():
    return [pipeline.lint_text(src, "a.py", ALL) for _, src in SOURCES]


def test_local_edits_equal_the_whole_module_transform(monkeypatch, local_results):
    _transform_only(monkeypatch)
    compared = statement_level = 0
    for (name, source), fast in zip(SOURCES, local_results):
        slow = pipeline.lint_text(source, "a.py", ALL)
        assert [(f.code, f.row, f.column) for f in fast.findings] == [(f.code, f.row, f.column) for f in slow.findings]
        for f, g in zip(fast.findings, slow.findings):
            assert (f.fix is None) == (g.fix is None), (name, f.code)
            if f.fix is None:
                continue
            compared += 1
            # The same text, always; and for fixes that replace statements, the
            # same edits (expression-level fixes keep the edits the local path
            # has always given: one per replaced expression).
            assert apply_edits(source, f.fix.edits)[0] == apply_edits(source, g.fix.edits)[0], (name, f.code)
            if f.code in STATEMENT_LEVEL or any("import os" in e.content for e in g.fix.edits):
                statement_level += 1
                assert f.fix.edits == g.fix.edits, (name, f.code)
    assert compared >= 50 and statement_level >= 10


def test_statement_level_fixes_do_not_transform_the_module(monkeypatch):
    """TL100 and TL302 insert statements, TL103 a statement at the top of a loop
    body, TL105 rewrites a statement, TL201 wraps a loop or adds a decorator:
    none of them rebuilds the whole module."""

    def whole_module(*args):
        raise AssertionError("a fix transformed the whole module")

    monkeypatch.setattr(pipeline, "replace_nodes", whole_module)
    seen = set()
    for _, source in SOURCES:
        result = pipeline.lint_text(source, "a.py", ALL)
        assert result.problems == ()
        seen |= {f.code for f in result.findings if f.fix is not None}
    assert {"TL100", "TL103", "TL105", "TL201", "TL302"} <= seen


def test_a_big_file_gets_every_fix_locally(monkeypatch):
    source = training_script(1500)
    monkeypatch.setattr(pipeline, "replace_nodes", lambda *a: (_ for _ in ()).throw(AssertionError("transform")))
    result = pipeline.lint_text(source, "big.py", ALL)
    # (at least 15 fixes: the generated script's loaders load in the main process and copy
    # blocking, where TL303 gives no fix)
    assert result.problems == () and sum(f.fix is not None for f in result.findings) >= 15


def test_context_kwargs_cover_every_node_type():
    """Every code generation argument a LibCST node accepts from its parent is
    known to node_edits (a LibCST upgrade adding one fails here, not silently)."""
    for name in dir(cst):
        obj = getattr(cst, name)
        if isinstance(obj, type) and issubclass(obj, cst.CSTNode):
            params = inspect.signature(obj._codegen_impl).parameters
            for p in params:
                if p not in ("self", "state"):
                    assert p in node_edits.CONTEXT_KWARGS, (name, p)
                    field = node_edits.CONTEXT_KWARGS[p]
                    if field is not None and not inspect.isabstract(obj) and obj.__name__ != "BaseSmallStatement":
                        assert field in node_edits.node_fields(obj), (name, p, field)


def test_a_defaulted_comma_in_the_middle_is_not_local():
    """`f(a, b)` with the first argument replaced by one whose comma is left to
    its default: the parent supplies ", " there, so only the transform is exact."""
    module = cst.parse_module("f(a, b)\n")
    call = module.body[0].body[0].value
    old = call.args[0]
    new = cst.Arg(cst.Name("z"))  # comma=MaybeSentinel.DEFAULT
    rendered = node_edits.render(module, anchors=[old])
    from torchlint.source.edits import LineIndex

    assert node_edits.fix_edits(module, "f(a, b)\n", LineIndex("f(a, b)\n"), rendered.anchors, {old: new}) is None
    keep_comma = cst.Arg(cst.Name("z"), comma=old.comma)
    edits = node_edits.fix_edits(module, "f(a, b)\n", LineIndex("f(a, b)\n"), rendered.anchors, {old: keep_comma})
    assert apply_edits("f(a, b)\n", edits)[0] == "f(z, b)\n"


def test_an_elif_is_not_rendered_as_an_if():
    source = "if a:\n    pass\nelif b:\n    pass\n"
    module = cst.parse_module(source)
    elif_ = module.body[0].orelse
    rendered = node_edits.render(module, anchors=[elif_])
    from torchlint.source.edits import LineIndex

    new = elif_.with_changes(test=cst.Name("c"))
    assert node_edits.fix_edits(module, source, LineIndex(source), rendered.anchors, {elif_: new}) is None


def _all_nodes(module):
    out, stack = [], [module]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(node.children)
    return out


@pytest.mark.parametrize("name,source", SOURCES[: len(EXTRA) + 8], ids=[n for n, _ in SOURCES[: len(EXTRA) + 8]])
def test_positions_are_those_of_libcsts_position_provider(name, source):
    from libcst.metadata import MetadataWrapper, PositionProvider

    module = cst.parse_module(source)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    expected = wrapper.resolve(PositionProvider)
    nodes = _all_nodes(module)
    rendered = node_edits.render(module, nodes)
    assert rendered.code == module.code
    assert {n: rendered.positions[n] for n in nodes} == {n: expected[n] for n in nodes}
