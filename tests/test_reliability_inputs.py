"""Bad and odd input at the API level: a TL000 or a Problem, never a traceback."""

import codecs

import libcst as cst
import pytest

from helpers import check, fix_bytes, fix_source, lint_bytes, lint_source

BAD = "import torch\nx = torch.zeros(2).cuda()\n"
FIXED = 'import torch\nx = torch.zeros(2, device="cuda")\n'


def tl000(src):
    findings = lint_source(src, "bad.py")
    assert [f.code for f in findings] == ["TL000"], findings
    return findings[0]


@pytest.mark.parametrize(
    "src,row,col,message",
    [
        (
            "import torch\nif x:\npass\n",
            3,
            1,
            "IndentationError: expected an indented block after 'if' statement on line 2",
        ),
        ("x = (1,\ny = 2\n", 1, 5, "SyntaxError: '(' was never closed"),
        ("x = 1 $ 2\n", 1, 7, "SyntaxError: invalid syntax"),
        ("if x:\n\ty = 1\n        z = 2\n", 3, 1, "TabError: inconsistent use of tabs and spaces in indentation"),
        ("if x:\n    y\n  z\n", 3, 4, "IndentationError: unindent does not match any outer indentation level"),
        ("print 'hi'\n", 1, 1, "SyntaxError: Missing parentheses in call to 'print'. Did you mean print(...)?"),
        (
            "a = 1\nb = 2\nx = '''abc\n",
            3,
            5,
            "SyntaxError: unterminated triple-quoted string literal (detected at line 3)",
        ),
    ],
)
def test_syntax_error_row_and_message(src, row, col, message):
    f = tl000(src)
    assert (f.row, f.column, f.message) == (row, col, message)
    assert "parser error" not in f.message and "tokenizer error" not in f.message


def test_syntax_error_is_not_fixed():
    src = "import torch\nx = torch.zeros(2).cuda(\n"
    fixed, findings = fix_source(src, "bad.py")
    assert fixed == src
    assert [f.code for f in findings] == ["TL000"]


@pytest.mark.parametrize(
    "src", ["", "   \n\n\t\n", "\n", "# only\n# comments\n", "#!/usr/bin/env python\n", "\x0c\n", "'''doc'''"]
)
def test_empty_like_files_are_clean(src):
    assert lint_source(src, "e.py") == []
    assert fix_source(src, "e.py") == (src, [])


def test_form_feed_keeps_rows_and_noqa():
    src = "import torch\n\x0c\nx = torch.zeros(2).cuda()  # noqa: TL104\ny = torch.zeros(2).cuda()\n"
    assert [(f.code, f.row) for f in lint_source(src)] == [("TL104", 4)]


def test_unicode_line_separator_in_comment_keeps_rows():
    src = "import torch\n# a\u2028b\nx = torch.zeros(2).cuda()  # noqa: TL104\n"
    assert lint_source(src) == []


def test_unicode_identifiers():
    src = "import torch\nτενσορ = torch.zeros(2).cuda()\n"
    (f,) = lint_source(src)
    assert (f.code, f.row, f.column) == ("TL104", 2, 10)
    assert fix_source(src)[0] == 'import torch\nτενσορ = torch.zeros(2, device="cuda")\n'


def test_tabs_indentation():
    src = "import torch\nfor b in loader:\n\tx = torch.zeros(2).cuda()\n\tmodel(b, x).sum().backward()\n"
    assert [f.code for f in lint_source(src)] == ["TL104"]
    assert (
        fix_source(src)[0]
        == 'import torch\nfor b in loader:\n\tx = torch.zeros(2, device="cuda")\n\tmodel(b, x).sum().backward()\n'
    )


def test_null_byte_in_text():
    f = tl000("x = 1\x00\n")
    assert "null" in f.message


def test_lone_surrogate():
    f = tl000("x = 1\ny = '\ud800'\n")
    assert (f.row, f.column) == (2, 6)
    assert "surrogate" in f.message


def test_no_trailing_newline():
    src = "import torch\nx = torch.zeros(2).cuda()"
    assert fix_source(src)[0] == 'import torch\nx = torch.zeros(2, device="cuda")'


def test_crlf_kept_by_fix():
    src = BAD.replace("\n", "\r\n")
    fixed, remaining = fix_source(src)
    assert fixed == FIXED.replace("\n", "\r\n")
    assert remaining == []


def test_cr_only_file_is_linted_and_never_loses_its_last_newline():
    # LibCST drops a final lone \r when printing; the fix is withheld rather than losing it.
    src = BAD.replace("\n", "\r")
    (f,) = lint_source(src)
    assert (f.code, f.row) == ("TL104", 2)
    assert fix_source(src)[0] == src
    mid = "import torch\rx = torch.zeros(2).cuda()\ry = 1\n"
    assert fix_source(mid)[0] == 'import torch\rx = torch.zeros(2, device="cuda")\ry = 1\n'


def test_mixed_newlines_kept():
    src = "import torch\r\nx = torch.zeros(2).cuda()\ny = 1\r\n"
    assert fix_source(src)[0] == 'import torch\r\nx = torch.zeros(2, device="cuda")\ny = 1\r\n'


def test_very_long_line():
    src = "import torch\nx = '" + "a" * 200_000 + "'\ny = torch.zeros(2).cuda()\n"
    assert [(f.code, f.row) for f in lint_source(src)] == [("TL104", 3)]


def test_long_flat_literal_is_fine():
    src = "import torch\ndata = [" + ", ".join(str(i) for i in range(5000)) + "]\ny = torch.zeros(2).cuda()\n"
    assert [(f.code, f.row) for f in lint_source(src)] == [("TL104", 3)]


# Deep nesting: LibCST's native parser overflows the C stack (a segfault that
# kills the process) past about 1,000 nested brackets; CPython refuses > 200.
@pytest.mark.parametrize(
    "src,message",
    [
        ("x = " + "(" * 5000 + "1" + ")" * 5000 + "\n", "SyntaxError: too many nested parentheses"),
        ("x = " + "[" * 1000 + "]" * 1000 + "\n", "SyntaxError: too many nested parentheses"),
        ("x = f(" * 300 + ")" * 300 + "\n", "SyntaxError: too many nested parentheses"),
        (
            "".join(" " * i + "if x:\n" for i in range(1000)) + " " * 1000 + "pass\n",
            "IndentationError: too many levels of indentation",
        ),
        ("x = " + "+".join(["1"] * 20000) + "\n", "SyntaxError: too complex to parse (expressions nested too deeply)"),
        ("x = " + "not " * 5000 + "1\n", "SyntaxError: too complex to parse (expressions nested too deeply)"),
        ("x = " + "1 if y else " * 5000 + "2\n", "SyntaxError: too complex to parse (expressions nested too deeply)"),
        ("x = " + "lambda: " * 5000 + "1\n", "SyntaxError: too complex to parse (expressions nested too deeply)"),
        ('x = f"{' + "(" * 3000 + "1" + ")" * 3000 + '}"\n', "SyntaxError: f-string: too many nested parenthesis"),
        (
            'x = f"{' + "1 if y else " * 5000 + '1}"\n',
            "SyntaxError: too complex to parse (expressions nested too deeply)",
        ),
    ],
    ids=[
        "parens-5000",
        "lists-1000",
        "calls-300",
        "ifs-1000",
        "binop-20000",
        "not-5000",
        "ifexp-5000",
        "lambda-5000",
        "fstring-parens-3000",
        "fstring-ifexp-5000",
    ],
)
def test_deep_nesting_is_a_syntax_error_not_a_crash(src, message):
    f = tl000(src)
    assert f.message == message
    assert fix_source(src)[0] == src


def test_deep_but_valid_nesting_is_a_problem_or_clean():
    # 150 nested brackets: CPython accepts it; analysis may give up, but as a Problem.
    src = "import torch\nx = " + "(" * 150 + "1" + ")" * 150 + "\ny = torch.zeros(2).cuda()\n"
    result = check(src, "deep.py")
    assert [f.code for f in result.findings] in (["TL104"], [])
    assert result.findings or result.problems


def test_chain_of_1500_is_a_problem_not_a_traceback():
    src = "import torch\nx = " + "-" * 1500 + "1\ny = torch.zeros(2).cuda()\n"
    result = check(src, "chain.py")
    assert not [f for f in result.findings if f.code == "TL000"] or result.findings[0].row == 2
    if not result.findings:
        assert result.problems and "nested" in result.problems[0].message


@pytest.mark.slow
def test_20000_line_file():
    # Clean and broken variants (a finding's positions cost a full-module pass;
    # its time on this size is noted in docs/reliability.md).
    body = "".join(f"def f{i}(a):\n    return a + {i}\n" for i in range(10000))
    src = "import torch\n" + body
    assert src.count("\n") > 20000
    assert lint_source(src, "big.py") == []
    f = tl000(src + "x = (\n")
    assert f.row == 20002


# ---- bytes ----


def test_lint_bytes_undecodable():
    (f,) = lint_bytes(b"x = 1\ny = '\xff'\n", "b.py").findings
    assert (f.code, f.row, f.column) == ("TL000", 2, 6)
    assert f.message.startswith("cannot decode")


def test_lint_bytes_binary():
    (f,) = lint_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "img.py").findings
    assert f.code == "TL000" and "NUL" in f.message


def test_lint_bytes_unknown_coding():
    (f,) = lint_bytes(b"# -*- coding: no-such-codec -*-\nx = 1\n", "c.py").findings
    assert f.code == "TL000" and "no-such-codec" in f.message


@pytest.mark.parametrize(
    "data",
    [
        b"# coding: undefined\nx = 1\n",  # raises a bare UnicodeError
        b"# coding: rot13\nx = 1\n",  # not a text encoding
        b"# coding: utf-16\nx = 1\n",
        b"\xff\xfex\x00=\x001\x00",  # UTF-16 without a cookie
    ],
)
def test_lint_bytes_odd_codecs(data):
    (f,) = lint_bytes(data, "c.py").findings
    assert f.code == "TL000" and f.message.startswith("cannot decode")
    assert fix_bytes(data, "c.py")[0] == data


def test_decode_error_row_after_bom():
    (f,) = lint_bytes(codecs.BOM_UTF8 + b"x = 1\ny = '\xff'\n", "b.py").findings
    assert (f.row, f.column) == (2, 6)


def test_lint_bytes_latin1_cookie():
    assert lint_bytes(b"# -*- coding: latin-1 -*-\nx = '\xe9'\n", "l.py").findings == ()


def test_fix_bytes_keeps_bom_and_crlf():
    data = codecs.BOM_UTF8 + BAD.replace("\n", "\r\n").encode()
    new, remaining = fix_bytes(data, "b.py")
    assert new == codecs.BOM_UTF8 + FIXED.replace("\n", "\r\n").encode()
    assert remaining == []
    assert lint_bytes(new, "b.py").findings == ()


def test_fix_bytes_keeps_latin1():
    data = b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'\nx = torch.zeros(2).cuda()\n"
    new, _ = fix_bytes(data, "l.py")
    assert new == b"# -*- coding: latin-1 -*-\nimport torch\ns = '\xe9'\nx = torch.zeros(2, device=\"cuda\")\n"


def test_fix_bytes_unchanged_and_undecodable():
    assert fix_bytes(b"x = 1\n", "a.py") == (b"x = 1\n", [])
    data = b"\xff\xfe\x00x"
    new, findings = fix_bytes(data, "a.py")
    assert new == data and [f.code for f in findings] == ["TL000"]


def test_fixed_output_parses():
    fixed, _ = fix_source(BAD.replace("\n", "\r\n"))
    cst.parse_module(fixed)


def test_bom_in_text_is_not_code_and_is_kept_by_fix():
    src = "\ufeff" + BAD
    (f,) = lint_source(src)
    assert (f.code, f.row, f.column) == ("TL104", 2, 5)
    assert fix_source(src)[0] == "\ufeff" + FIXED


def test_brackets_inside_plain_strings_do_not_count():
    src = 'x = "f" + "' + "(" * 300 + '"\n'
    assert lint_source(src) == []


@pytest.mark.parametrize(
    "data, wide",
    [
        ("import torch\nx = 1\n".encode("utf-16"), "UTF-16"),  # with a BOM
        ("import torch\nx = 1\n".encode("utf-16-le"), "UTF-16"),
        ("import torch\nx = 1\n".encode("utf-16-be"), "UTF-16"),
        ("import torch\nx = 1\n".encode("utf-32"), "UTF-32"),
        (b"# coding: utf-16\nx = 1\n", "UTF-16"),
    ],
)
def test_utf16_and_utf32_source_is_named_not_called_binary(data, wide):
    (f,) = lint_bytes(data, "w.py").findings
    assert f.code == "TL000"
    assert f.message == f"cannot decode file: {wide} source is not supported; save the file as UTF-8"
    assert "NUL" not in f.message


def test_identifier_newer_than_this_pythons_unicode_tables_is_tl000():
    """LibCST builds the node, then refuses it (CSTValidationError): a syntax
    error in CPython's words, not an exception."""
    findings = lint_bytes(b"\xf0\xb1\x8d\x90\n", "u.py").findings  # U+31350, new in Unicode 15.0
    if "\U00031350".isidentifier():  # this Python knows it: a plain name, nothing to report
        assert findings == ()
    else:
        (f,) = findings
        assert f.code == "TL000" and f.message.startswith("SyntaxError")
