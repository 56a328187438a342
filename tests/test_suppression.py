import pytest

from torchlint.source.suppression import parse_suppressions, suppression_comment

from helpers import lint_source

BASE = "import torch\ndevice = torch.device('cuda')\n"
LINE = "x = torch.randn(3).to(device)"


def codes(src):
    return [f.code for f in lint_source(src, "t.py")]


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("  # noqa: TL104", True),
        ("  # noqa:TL104,TL501", True),
        ("  # NOQA", True),
        ("  # noqa: TL501", False),
        ("  # torchlint: ignore[TL104]", True),
        ("  # torchlint: ignore[TL501, TL104]", True),
        ("  # torchlint: ignore", True),
        ("  # torchlint: ignore[TL501]", False),
        ("  # type: ignore", False),
    ],
)
def test_line_suppression(comment, suppressed):
    assert codes(BASE + LINE + comment + "\n") == ([] if suppressed else ["TL104"])


def test_line_suppression_is_per_line():
    src = BASE + LINE + "  # noqa: TL104\n" + LINE.replace("x", "y") + "\n"
    assert [f.row for f in lint_source(src, "t.py")] == [4]


def test_file_level_suppression_in_header_only():
    assert codes("# torchlint: ignore-file[TL104]\n" + BASE + LINE + "\n") == []
    assert codes("#!/usr/bin/env python\n\n# torchlint: ignore-file\n" + BASE + LINE + "\n") == []
    assert codes("# torchlint: ignore-file[TL501]\n" + BASE + LINE + "\n") == ["TL104"]
    # after code it is not a file-level comment
    assert codes(BASE + "# torchlint: ignore-file[TL104]\n" + LINE + "\n") == ["TL104"]


def test_parse_suppressions_structure():
    s = parse_suppressions("x = 1  # noqa: TL101, TL102\ny = 2  # torchlint: ignore\n")
    assert s.suppressed("TL101", 1) and s.suppressed("TL102", 1) and not s.suppressed("TL103", 1)
    assert s.suppressed("TL999", 2) and not s.suppressed("TL101", 3)


def test_suppression_comment_adds_and_merges():
    assert suppression_comment("TL104", "x = f()\n") == "x = f()  # torchlint: ignore[TL104]\n"
    assert (
        suppression_comment("TL104", "x = f()  # torchlint: ignore[TL501]\r\n")
        == "x = f()  # torchlint: ignore[TL104, TL501]\r\n"
    )
    line = suppression_comment("TL104", LINE + "\n")
    assert codes(BASE + line) == []


def test_unknown_codes_in_suppression_comments():
    from torchlint.rules import all_codes
    from torchlint.source.suppression import unknown_codes

    src = (
        "# torchlint: ignore-file[TL302, TL777]\n"
        "import os  # noqa: E501, F401\n"  # other linters' codes: theirs
        "x = 1  # noqa: TL104, TL999\n"
        "y = 2  # torchlint: ignore[TL101, ABC1]\n"
        "z = 3  # NOQA:tl998\n"
    )
    assert unknown_codes(src, all_codes()) == [
        (1, "TL777", "# torchlint: ignore-file[...]"),
        (3, "TL999", "# noqa"),
        (4, "ABC1", "# torchlint: ignore[...]"),
        (5, "tl998", "# noqa"),
    ]
    assert unknown_codes("x = 1\n", all_codes()) == []
