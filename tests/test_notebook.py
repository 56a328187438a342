"""Jupyter notebooks: code cells linted as one module, reported and fixed per cell."""

import json

import pytest

from torchlint.engine.pipeline import lint_text, process_bytes
from torchlint.rules import all_codes
from torchlint.source import notebook as notebook_mod
from torchlint.source.notebook import replace_sources

from helpers import api, code, notebook

ALL = frozenset(all_codes())


def check_notebook(data, path, enabled, fix=False):
    """(findings, new bytes or None, problems) of the pipeline on a notebook."""
    out = process_bytes(data, path, enabled, "fix" if fix else "lint")
    return list(out.findings), out.new_data, list(out.problems)


OUTPUT = {"name": "stdout", "output_type": "stream", "text": ["tensor([1., 2.]) — ok\n"]}
IMAGE = {
    "data": {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure>"]},
    "metadata": {},
    "output_type": "display_data",
}


def third_cell_notebook(source_as_list=True):
    third = ["# build the input\n", "\n", "x = torch.zeros(3).to(device)\n", "print(x)"]
    return notebook(
        {"cell_type": "markdown", "metadata": {}, "source": ["# Demo\n", "Some text."]},
        code(
            ["import torch\n", "device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')"],
            1,
            metadata={"tags": ["setup"]},
        ),
        code(third if source_as_list else "".join(third), 2, [OUTPUT, IMAGE], {"collapsed": False}),
        code(["print('done')\n"], 3, [OUTPUT]),
    )


def test_mistake_in_third_cell_is_reported_at_that_cell():
    findings, new, problems = check_notebook(third_cell_notebook(), "nb.ipynb", ALL)
    assert new is None and problems == []
    assert [(f.code, f.cell, f.row, f.column) for f in findings] == [("TL104", 3, 3, 5)]
    f = findings[0]
    assert (f.end_row, f.end_column) == (3, 19)
    # The fix is expressed in the cell's own rows.
    assert f.fix is not None and {e.row for e in f.fix.edits} == {3}


@pytest.mark.parametrize("as_list", [True, False], ids=["source-list", "source-string"])
def test_fix_touches_only_that_cells_source(as_list):
    data = third_cell_notebook(as_list)
    findings, new, problems = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert problems == [] and findings == []
    assert new is not None
    before, after = json.loads(data), json.loads(new)
    fixed_src = after["cells"][2]["source"]
    assert isinstance(fixed_src, list) is as_list
    assert "".join(fixed_src) == "# build the input\n\nx = torch.zeros(3, device=device)\nprint(x)"
    # Everything except that cell's source is identical, byte for byte.
    old_text, new_text = data.decode(), new.decode()
    old_line = '"x = torch.zeros(3).to(device)\\n"'
    new_line = '"x = torch.zeros(3, device=device)\\n"'
    if not as_list:
        old_line, new_line = old_line[1:-1], new_line[1:-1]
    assert old_text.count(old_line) == 1
    assert new_text == old_text.replace(old_line, new_line)
    before["cells"][2]["source"] = fixed_src
    assert before == after
    # Fixing again changes nothing.
    assert check_notebook(new, "nb.ipynb", ALL, fix=True)[1] is None


def test_formatting_is_preserved_for_other_indents_and_key_orders():
    cells = [code("import torch\ndevice = 'cuda'\n", 1), code(["z = torch.ones(2).cuda()\n"], 2, [OUTPUT])]
    nb = {"nbformat_minor": 2, "nbformat": 4, "metadata": {}, "cells": cells}  # odd key order
    data = json.dumps(nb, indent=4).encode() + b"\r\n" * 0  # ASCII escapes, indent 4, no trailing newline
    _, new, _ = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert new is not None
    assert new.decode() == data.decode().replace("z = torch.ones(2).cuda()", 'z = torch.ones(2, device=\\"cuda\\")')


def test_magics_and_shell_escapes_do_not_cause_syntax_errors():
    data = notebook(
        code(["%matplotlib inline\n", "%load_ext autoreload\n", "!pip install -q foo\n", "import torch\n"]),
        code(["%%bash\n", "echo $HOME | tr a b\n", "for x in (: do\n"]),
        code(
            [
                "files = !ls *.pt\n",
                "t = %timeit -o sum(range(10))\n",
                "?torch.randn\n",
                "torch.randn??\n",
                "for f in files:\n",
                "    !echo {f}\n",
                "    print(f)\n",
                "s = '''\n",
                "!not a magic in a string\n",
                "'''\n",
                "y = torch.zeros(2).cuda()\n",
            ]
        ),
    )
    findings, new, problems = check_notebook(data, "nb.ipynb", ALL)
    assert problems == []
    assert [(f.code, f.cell, f.row) for f in findings] == [("TL104", 3, 11)]
    # Fixing restores every magic line exactly.
    findings, new, problems = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert findings == [] and new is not None
    after = json.loads(new)
    assert after["cells"][0] == json.loads(data)["cells"][0]
    assert after["cells"][1] == json.loads(data)["cells"][1]
    src = after["cells"][2]["source"]
    assert src[:10] == json.loads(data)["cells"][2]["source"][:10]
    assert src[10] == 'y = torch.zeros(2, device="cuda")\n'


def test_names_flow_across_cells():
    # `device` is bound in cell 1 and used in cell 2: TL104 needs to know it's a device.
    data = notebook(code("import torch\ndevice = torch.device('cuda')\n"), code("a = torch.zeros(3).to(device)\n"))
    findings, _, _ = check_notebook(data, "nb.ipynb", ALL)
    assert [(f.cell, f.row) for f in findings] == [(2, 1)]


def test_suppression_comment_in_a_cell():
    data = notebook(code("import torch\n"), code("a = torch.zeros(3).cuda()  # noqa: TL104\n"))
    assert check_notebook(data, "nb.ipynb", ALL)[0] == []


def test_selection_is_honoured():
    assert check_notebook(third_cell_notebook(), "nb.ipynb", frozenset({"TL501"}))[0] == []


def test_syntax_error_in_a_cell_is_tl000_at_that_cell():
    data = notebook(code("import torch\n"), code("x = 1\n"), code("for x in y\n    pass\n"))
    findings, new, _ = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert new is None
    alone = lint_text("for x in y\n    pass\n", "a.py", ALL).findings
    assert [(f.code, f.cell, f.row, f.column) for f in findings] == [("TL000", 3, alone[0].row, alone[0].column)]


@pytest.mark.parametrize(
    "data,reason",
    [
        (b"{not json", "invalid JSON"),
        (b'{"worksheets": []}', "not a Jupyter notebook"),
        (b"[1, 2]", "not a Jupyter notebook"),
        (b'{"cells": [{"cell_type": "code", "source": 3}]}', "neither a string nor a list"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_broken_notebook_is_tl000(data, reason):
    findings, new, problems = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert new is None and problems == []
    assert len(findings) == 1 and findings[0].code == "TL000"
    assert findings[0].message.startswith("cannot read notebook: ") and reason in findings[0].message


def test_non_python_notebook_is_skipped():
    nb = json.loads(notebook(code("x <- 1\n")))
    nb["metadata"] = {"kernelspec": {"language": "R", "name": "ir"}, "language_info": {"name": "R"}}
    assert check_notebook(json.dumps(nb).encode(), "nb.ipynb", ALL) == ([], None, [])


def test_cross_cell_fix_is_dropped():
    from torchlint.findings import Edit

    layout = notebook_mod.read(notebook(code("a = 1\nb = 2\n"), code("c = 3\n")))
    assert layout.edits_cell([Edit(2, 1, 3, 2, "x")]) is None
    assert layout.edits_cell([Edit(1, 1, 1, 2, "x"), Edit(3, 1, 3, 2, "y")]) is None
    assert layout.edits_cell([Edit(3, 1, 3, 2, "y")]) == 1
    # Deleting cell 1's last line including its newline stays in cell 1.
    assert layout.edits_cell([Edit(2, 1, 3, 1, "")]) == 0


def test_replace_sources_empty_list_source():
    text = json.dumps({"cells": [code([])], "metadata": {}}, indent=1) + "\n"
    out = replace_sources(text, {1: ("a = 1\nb = 2", True)})
    assert json.loads(out)["cells"][0]["source"] == ["a = 1\n", "b = 2"]
    assert out.replace(' "source": [\n    "a = 1\\n",\n    "b = 2"\n   ]', ' "source": []') == text


def test_operator_and_continuation_lines_are_not_magics():
    src = (
        "import torch\n"
        "r = (10\n"
        "     % 3)\n"
        "ok = 1 \\\n"
        "    != 2\n"
        'doc = """\n'
        "%not a magic\n"
        '"""\n'
        "y = torch.zeros(2).cuda()\n"
    )
    findings, _, problems = check_notebook(notebook(code(src)), "nb.ipynb", ALL, fix=True)
    assert problems == [] and findings == []
    findings, _, _ = check_notebook(notebook(code(src)), "nb.ipynb", ALL)
    assert [(f.code, f.row) for f in findings] == [("TL104", 9)]


def test_fix_that_adds_lines_keeps_later_cells_mapped(monkeypatch):
    """A fix growing cell 1 by a line: later findings still land on their cell rows,
    and the list-form source of the grown cell is written back line by line."""
    import libcst as cst

    import torchlint.engine.checker as checker
    from torchlint.rules import all_rules
    from torchlint.rules.base import Rule

    class Grow(Rule):
        CODE, NAME, MESSAGE, FIX_TITLE = "TL998", "grow", "grow", "grow"

        def check(self, ctx):
            for stmt in ctx.module.body:
                if ctx.module.code_for_node(stmt) == "grow()\n":
                    new = cst.FlattenSentinel([cst.parse_statement("grown()\n"), cst.parse_statement("more = 1\n")])
                    ctx.report(stmt, replacements={stmt: new})

    monkeypatch.setattr(checker, "all_rules", lambda: tuple(all_rules()) + (Grow,))
    data = notebook(
        code(["grow()\n", "after = 2"], 1, [OUTPUT]),
        code(["from torch.autograd import profiler\n", "with profiler.profile(use_cuda=True):\n", "    run()\n"]),
    )
    enabled = ALL | {"TL998"}
    before, _, _ = check_notebook(data, "nb.ipynb", enabled)
    assert [(f.code, f.cell, f.row) for f in before] == [("TL998", 1, 1), ("TL501", 2, 2)]
    findings, new, problems = check_notebook(data, "nb.ipynb", enabled, fix=True)
    assert problems == []
    assert [(f.code, f.cell, f.row, f.fix) for f in findings] == [("TL501", 2, 2, None)]
    after = json.loads(new)
    assert after["cells"][0]["source"] == ["grown()\n", "more = 1\n", "after = 2"]
    assert after["cells"][0]["outputs"] == [OUTPUT]
    assert after["cells"][1] == json.loads(data)["cells"][1]
    assert new.decode() == data.decode().replace('"grow()\\n",\n', '"grown()\\n",\n    "more = 1\\n",\n')


def test_notebook_outcome_counts_fixes():
    r = process_bytes(third_cell_notebook(), "nb.ipynb", ALL, "fix")
    assert r.fixes_applied == 1 and r.new_data is not None and r.findings == ()
    assert process_bytes(third_cell_notebook(), "nb.ipynb", ALL, "lint").fixes_applied == 0


@pytest.mark.parametrize("indent", [1, 2, 4])
def test_replace_sources_empty_list_follows_the_files_indent(indent):
    nb = {"cells": [code(["a = 0\n"]), code([])], "metadata": {}}
    text = json.dumps(nb, indent=indent) + "\n"
    out = replace_sources(text, {2: ("a = 1\nb = 2", True)})
    nb["cells"][1]["source"] = ["a = 1\n", "b = 2"]
    assert out == json.dumps(nb, indent=indent) + "\n"


def test_replace_sources_keeps_crlf_layout():
    nb = {"cells": [code(["a = 0\n", "b = 0\n"])], "metadata": {}}
    text = (json.dumps(nb, indent=1) + "\n").replace("\n", "\r\n")
    out = replace_sources(text, {1: ("a = 1\nb = 2\nc = 3\n", True)})
    nb["cells"][0]["source"] = ["a = 1\n", "b = 2\n", "c = 3\n"]
    assert out == (json.dumps(nb, indent=1) + "\n").replace("\n", "\r\n")


@pytest.mark.parametrize(
    "magic",
    [
        "!pip install torch \\\n    torchvision\n",
        "%pip install torch \\\n  torchvision \\\n  torchaudio\n",
        "files = !ls \\\n   -la\n",
        "    !echo a \\\nb\n",  # a continuation with less indentation than the magic
    ],
)
def test_magic_continued_with_a_backslash_is_skipped_whole(magic):
    """IPython joins a line ending in a backslash with the next: both are the
    magic, so neither is a false TL000, and the rest of the notebook is linted."""
    body = magic if not magic.startswith(" ") else "if True:\n" + magic
    nb = notebook(code(body + "import torch\nx = torch.randn(3).to('cuda')\n"), code("y = torch.zeros(2).cuda()\n"))
    findings = api.lint_bytes(nb, "n.ipynb").findings
    assert [(f.code, f.cell) for f in findings] == [("TL104", 1), ("TL104", 2)]
    new, _ = api.fix_bytes(nb, "n.ipynb")
    source = "".join(json.loads(new)["cells"][0]["source"])
    assert source.startswith(body)  # the magic's lines come back as written


@pytest.mark.parametrize(
    "magic", ["%%time", "%%timeit -n 1 -r 1", "%%capture out", "%%prun -s cumulative", "%%python3"]
)
def test_a_cell_magic_that_runs_python_has_its_body_linted_and_fixed(magic):
    """Issue 27: a cell starting with `%%time` (often the training cell) was
    skipped whole. As in Ruff, the body of a cell magic that runs Python is
    linted, and fixing it restores the magic line exactly."""
    data = notebook(
        code(["import torch\n", "device = torch.device('cuda')\n"]),
        code([f"{magic}\n", "for step in range(10):\n", "    x = torch.zeros(8).to(device)\n"]),
    )
    findings, _, problems = check_notebook(data, "nb.ipynb", ALL)
    assert problems == []
    assert [(f.code, f.cell, f.row, f.column) for f in findings] == [("TL104", 2, 3, 9)]
    findings, new, problems = check_notebook(data, "nb.ipynb", ALL, fix=True)
    assert problems == [] and findings == []
    src = json.loads(new)["cells"][1]["source"]
    assert src == [f"{magic}\n", "for step in range(10):\n", "    x = torch.zeros(8, device=device)\n"]


@pytest.mark.parametrize(
    "magic", ["%%bash", "%%writefile train.py", "%%html", "%%sh", "%%script python", "%%javascript"]
)
def test_a_cell_magic_whose_body_is_not_python_is_skipped_whole(magic):
    data = notebook(
        code(["import torch\n", "device = torch.device('cuda')\n"]),
        code([f"{magic}\n", "x = torch.zeros(8).to(device)\n", "for x in (: do\n"]),
    )
    findings, _, problems = check_notebook(data, "nb.ipynb", ALL)
    assert (findings, problems) == ([], [])


def test_cell_magic_names():
    assert notebook_mod.cell_magic("%%time\n") == "time"
    assert notebook_mod.cell_magic("  %%timeit -n 3 x = 1") == "timeit"
    assert notebook_mod.cell_magic("%time f()") is None
    assert notebook_mod.cell_magic("x = 1") is None
    assert notebook_mod.cell_magic("%%") == ""


def test_a_timed_statement_is_linted_and_fixed_with_its_magic_kept():
    """`%time <statement>` runs the statement in the notebook's namespace: it
    is linted at its own columns, and a fix of it keeps the magic."""
    data = notebook(
        code(["import torch\n", "x = torch.tensor([1.0, 2.0])\n"]),
        code(["%time x.cuda()\n", "%timeit -n 1 y = 1\n"]),
    )
    findings = api.lint_bytes(data, "n.ipynb").findings
    assert [(f.code, f.cell, f.row, f.column) for f in findings] == [("TL105", 2, 1, 7)]
    new, _ = api.fix_bytes(data, "n.ipynb")
    assert json.loads(new)["cells"][1]["source"] == ["%time x = x.cuda()\n", "%timeit -n 1 y = 1\n"]
    untouched = notebook(code(["import torch\n", "%time y = torch.ones(2)\n"]))
    assert api.fix_bytes(untouched, "n.ipynb")[0] == untouched
