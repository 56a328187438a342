"""Incremental parsing (torchlint/source/reparse.py): after any edit, the module equals
a fresh parse of the new text, node for node, and unchanged statements keep
their node objects."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from torchlint.source.parsing import SourceError, parse
from torchlint.source.reparse import parse_whole, reparse

from random_edits import edit, sources

SEEDS = range(40)
EDITS_PER_SEED = 30


def fresh(text: str):
    try:
        return parse(text)
    except SourceError as exc:
        return exc


@pytest.mark.parametrize("seed", SEEDS)
def test_reparse_equals_a_fresh_parse_after_random_edits(seed):
    rng = random.Random(seed)
    files = sources()
    text = rng.choice(files)
    previous = parse_whole(text)
    incremental = parsed = 0
    for step in range(EDITS_PER_SEED):
        text = edit(text, rng)
        expected = fresh(text)
        if isinstance(expected, SourceError):
            with pytest.raises(SourceError) as raised:
                reparse(previous, text)
            assert (raised.value.message, raised.value.row, raised.value.column) == (
                expected.message,
                expected.row,
                expected.column,
            )
            continue
        got = reparse(previous, text)
        assert got.module.deep_equals(expected), (seed, step)
        assert got.module.code == expected.code
        incremental += not got.whole_parses
        parsed += 1
        previous = got
    # (a seed whose first or second edit leaves the file unparsable for good has nothing
    # to reparse: the first parse after `parse_whole` may itself be whole)
    assert incremental or parsed <= 1 or seed % 4, "no edit was parsed incrementally"


def test_unchanged_statements_keep_their_nodes():
    text = "import torch\n" + "".join(f"\n\ndef f{i}():\n    return {i}\n" for i in range(10))
    first = parse_whole(text)
    second = reparse(first, text.replace("return 5", "return 55"))
    assert not second.whole_parses
    old, new = first.module.body, second.module.body
    assert new[0] is old[0] and new[-1] is old[-1]  # far from the edit: reused
    assert new[6] is not old[6]  # the edited function: parsed again
    assert second.module.deep_equals(cst.parse_module(second.text))


@pytest.mark.parametrize(
    "before, after",
    [
        # The first indented block decides the file's indentation: a change there re-parses all.
        ("a = 1\nb = 2\nc = 3\nd = 4\ndef f():\n    pass\n", "a = 1\nb = 2\nc = 3\nd = 4\ndef f():\n  pass\n"),
        # An indented comment typed after a block belongs to that block.
        ("def f():\n    x\ny = 1\nz = 2\nw = 3\n", "def f():\n    x\n    # c\ny = 1\nz = 2\nw = 3\n"),
        # `else:` typed at column 0 joins the `if` before it.
        ("a = 1\nif x:\n    pass\ny = 1\nz = 2\n", "a = 1\nif x:\n    pass\nelse:\n    pass\ny = 1\nz = 2\n"),
        # Line endings: the file's first line break decides.
        ("a = 1\nb = 2\nc = 3\nd = 4\n", "a = 1\r\nb = 2\nc = 3\nd = 4\n"),
        # A trailing comment that will belong to the next statement's leading lines.
        ("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n", "a = 1\nb = 2\n# about c\nc = 3\nd = 4\ne = 5\n"),
        # No final line break.
        ("a = 1\nb = 2\nc = 3\nd = 4\n", "a = 1\nb = 2\nc = 3\nd = 4"),
    ],
)
def test_edits_at_the_boundaries(before, after):
    got = reparse(parse_whole(before), after)
    expected = cst.parse_module(after)
    assert got.module.deep_equals(expected)
    assert got.module.code == expected.code
