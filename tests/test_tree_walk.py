"""The project pass's walker: every node that holds code, as `ast.walk` finds
them, without the expression contexts."""

import ast

from torchlint.analysis.project.tree_walk import all_nodes, children

_SOURCE = """\
import torch
class Net(torch.nn.Module):
    def forward(self, x, *args, k: int = 1, **kw):
        with torch.no_grad():
            y = [v.item() for v in x if v > 0] or {a: b for a, b in kw.items()}
        return lambda z: z + y[0] if k else (yield x)
"""


def test_all_nodes_finds_what_ast_walk_finds_but_contexts():
    tree = ast.parse(_SOURCE)
    expected = {id(n) for n in ast.walk(tree) if not isinstance(n, ast.expr_context)}
    found = [id(n) for n in all_nodes(tree)]
    assert len(found) == len(set(found))  # each node once
    assert set(found) == expected


def test_children_are_the_direct_code_nodes():
    call = ast.parse("f(a, b=c)").body[0].value
    assert [type(n).__name__ for n in children(call)] == ["Name", "Name", "keyword"]
    name = ast.parse("a").body[0].value
    assert children(name) == []  # its `ctx` is no code
