"""`--add-noqa` (torchlint/engine/add_noqa.py): a comment at the end of each reported line,
merged with one already there, never inside a string or after a backslash,
never breaking code, and idempotent."""

import codecs
import json

import pytest

from torchlint.engine.add_noqa import add_noqa
from torchlint.rules import all_codes

from helpers import api, code, notebook

ALL = frozenset(all_codes())
HEAD = "import torch\ndevice = torch.device('cuda')\n"
MOVE = "torch.randn(3).to(device)"


def added(src: str) -> str:
    result = add_noqa(src.encode(), "t.py", ALL)
    assert not result.problems
    return result.new_data.decode() if result.new_data is not None else src


@pytest.mark.parametrize(
    "line, expected",
    [
        (f"x = {MOVE}", f"x = {MOVE}  # noqa: TL104"),
        (f"x = {MOVE}   ", f"x = {MOVE}  # noqa: TL104"),  # trailing blanks replaced
        (f"x = {MOVE}  # noqa: E501", f"x = {MOVE}  # noqa: E501, TL104"),
        (f"x = {MOVE}  # noqa:E501,F841", f"x = {MOVE}  # noqa: E501, F841, TL104"),
        (f"x = {MOVE}  # keep this", f"x = {MOVE}  # keep this  # noqa: TL104"),
        (f"x = {MOVE}  # torchlint: ignore[TL101]", f"x = {MOVE}  # torchlint: ignore[TL101, TL104]"),
        (f"x = '# noqa: E501' + str({MOVE})", f"x = '# noqa: E501' + str({MOVE})  # noqa: TL104"),
        (f"x = {MOVE}; y = torch.zeros(2).cuda()", f"x = {MOVE}; y = torch.zeros(2).cuda()  # noqa: TL104"),
    ],
)
def test_comment_at_the_end_of_the_reported_line(line, expected):
    out = added(HEAD + line + "\n")
    assert out == HEAD + expected + "\n"
    assert api.lint_source(out, "t.py") == []
    assert added(out) == out  # idempotent


def test_several_codes_on_one_line_are_sorted():
    src = HEAD + "with torch.autograd.profiler.profile() as p: x = torch.randn(3).to(device)\n"
    out = added(src)
    assert out.endswith("  # noqa: TL104, TL501\n")


def test_multi_line_strings_and_backslashes_are_never_broken():
    src = HEAD + (
        f's = """text\n""" + str({MOVE})\n'  # the string ends before the finding's line: fine
        f't = f"""{{ {MOVE} }}\n"""\n'  # the finding's line ends inside the string
        f"u = {MOVE} + \\\n    1\n"  # continued with a backslash
        f"w = ({MOVE} +\n     {MOVE})\n"  # inside brackets: comments are fine
    )
    result = add_noqa(src.encode(), "t.py", ALL)
    out = result.new_data.decode()
    compile(out, "t.py", "exec")
    lines = out.splitlines()
    assert lines[3] == f'""" + str({MOVE})  # noqa: TL104'
    assert lines[4] == f't = f"""{{ {MOVE} }}'  # untouched
    assert lines[6] == f"u = {MOVE} + \\"  # untouched
    assert lines[8].endswith("  # noqa: TL104") and lines[9].endswith("  # noqa: TL104")
    assert [w.path for w in result.warnings] == ["t.py:5", "t.py:7"]
    assert "ends inside a string" in result.warnings[0].message
    assert "continues with a backslash" in result.warnings[1].message
    assert add_noqa(out.encode(), "t.py", ALL).new_data is None  # idempotent


def test_encoding_bom_and_line_endings_are_kept():
    src = HEAD + f"x = {MOVE}\n"
    data = codecs.BOM_UTF8 + src.replace("\n", "\r\n").encode()
    new = add_noqa(data, "t.py", ALL).new_data
    assert new == codecs.BOM_UTF8 + (HEAD + f"x = {MOVE}  # noqa: TL104\n").replace("\n", "\r\n").encode()
    latin = b"# -*- coding: latin-1 -*-\n" + (HEAD + f"x = {MOVE}  # \xe9\n").encode("latin-1")
    new = add_noqa(latin, "t.py", ALL).new_data
    assert new.decode("latin-1").endswith(f"x = {MOVE}  # \xe9  # noqa: TL104\n")


def test_files_that_do_not_parse_or_decode_are_left_alone():
    assert add_noqa(b"def f(:\n    pass\n", "t.py", ALL).new_data is None
    assert add_noqa(b"x = '\xff'\n", "t.py", ALL).new_data is None
    assert add_noqa(b"x = 1\n", "t.py", ALL).new_data is None


def test_selection_decides_what_gets_a_comment():
    src = HEAD + f"x = {MOVE}\n"
    assert add_noqa(src.encode(), "t.py", ALL - {"TL104"}).new_data is None


def test_notebook_cells_get_their_comments():
    nb = notebook(
        code("%matplotlib inline\nimport torch\n"),
        {"cell_type": "markdown", "metadata": {}, "source": ["text"]},
        code(["!nvidia-smi\n", "x = torch.randn(3).to('cuda')\n", "y = 1"], outputs=[{"output_type": "stream"}]),
    )
    result = add_noqa(nb, "n.ipynb", ALL)
    assert result.added == 1
    doc = json.loads(result.new_data)
    assert doc["cells"][2]["source"] == ["!nvidia-smi\n", "x = torch.randn(3).to('cuda')  # noqa: TL104\n", "y = 1"]
    assert (
        doc["cells"][2]["outputs"] == [{"output_type": "stream"}]
        and doc["cells"][0]["source"] == "%matplotlib inline\nimport torch\n"
    )
    assert api.lint_bytes(result.new_data, "n.ipynb").findings == ()
    assert add_noqa(result.new_data, "n.ipynb", ALL).new_data is None
