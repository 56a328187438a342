"""A document's lint session (torchlint/engine/incremental.py) gives exactly the cold
lint's results after every edit: findings with their fixes and positions,
problems, and fix-all's text, over 1,000 seeded random edits of real-looking
files and edits of a notebook's cells."""

from __future__ import annotations

import json
import random

import pytest

from torchlint.api import check, fix_source, session
from torchlint.config import Settings
from torchlint.engine.incremental import Cancelled

from helpers import code, notebook
from random_edits import edit, sources

PREVIEW = Settings(preview=True)  # TL104 (the notebook cells' finding) is a preview rule

# The sessions and cold lints below run the default settings (no preview mode): with TL303
# stable they have a rule's findings and fixes to keep and compare, whatever the catalog says.
pytestmark = pytest.mark.usefixtures("stable_rule")

SEEDS = range(100)
EDITS_PER_SEED = 10  # 1,000 edits in all


@pytest.mark.parametrize("seed", SEEDS)
def test_session_lint_equals_cold_lint_after_random_edits(seed):
    rng = random.Random(1000 + seed)
    text = rng.choice(sources())
    lints = session("train.py")
    assert lints.check(text) == check(text, "train.py")
    for step in range(EDITS_PER_SEED):
        text = edit(text, rng)
        assert lints.check(text) == check(text, "train.py"), (seed, step)
        if step % 5 == 4:  # fix-all from the kept lint, then incremental passes
            assert lints.fix(text) == tuple(_cold_fix(text)), (seed, step)


def _cold_fix(text):
    from torchlint.config import Settings
    from torchlint.engine.pipeline import process_text

    settings = Settings()
    result = process_text(text, "train.py", settings.enabled_for("train.py"), mode="fix")
    assert (result.fixed_source or text, list(result.findings)) == fix_source(text, "train.py")
    return result.fixed_source if result.fixed_source is not None else text, result


def _notebook_text(sources_):
    cells = [code(s) for s in sources_]
    return notebook(*cells).decode("utf-8")


def test_notebook_cells_edited_one_by_one():
    rng = random.Random(7)
    cell_sources = ["import torch\nfrom torch.utils.data import DataLoader\ndevice = torch.device('cuda')\n"]
    for i in range(49):
        cell_sources.append(
            f"model{i} = torch.nn.Linear(3, 3).to(device)\nx{i} = torch.zeros(3).to(device)\nprint(model{i}(x{i}))\n"
        )
    lints = session("nb.ipynb")
    for step in range(40):
        i = rng.randrange(1, len(cell_sources))
        cell_sources[i] = edit(cell_sources[i], rng)
        text = _notebook_text(cell_sources)
        assert lints.check(text) == check(text, "nb.ipynb"), step
    assert json.loads(text)["cells"][0]["source"]


def test_a_cancelled_lint_leaves_the_session_usable():
    text = sources()[-1]
    lints = session("train.py")
    with pytest.raises(Cancelled):
        lints.check(text, cancelled=lambda: True)
    assert lints.check(text) == check(text, "train.py")


def test_unchanged_statements_are_not_rendered_again():
    text = sources()[-1]  # the generated 300-line script: findings all over
    lints = session("train.py")
    lints.check(text)
    before = lints.state.renders.statements_rendered
    edited = text.replace("lr: float = 3e-4", "lr: float = 4e-4")
    assert edited != text
    assert lints.check(edited) == check(edited, "train.py")
    assert lints.state.renders.statements_rendered - before <= 3
    assert not lints.state.parsed.whole_parses


_QUIET_UNTIL_MOVED = """import torch
from torch.utils.data import DataLoader


def helper():
    return 1


def make_loader(dataset):
    return DataLoader(dataset, batch_size=32)


def other():
    return 2


model = torch.nn.Linear(3, 3)
"""
_MOVED = _QUIET_UNTIL_MOVED.replace("torch.nn.Linear(3, 3)", 'torch.nn.Linear(3, 3).to("cuda")')


def test_first_lint_renders_only_the_statements_holding_findings():
    lints = session("train.py")
    result = lints.check(_MOVED)
    assert result == check(_MOVED, "train.py")
    assert [(f.code, f.row) for f in result.findings] == [("TL303", 10)]
    assert lints.state.renders.statements_rendered == 1  # make_loader, of 6 statements


def test_a_finding_appearing_in_a_statement_never_rendered_matches_the_cold_lint():
    """Moving the model makes a device in play: TL303 now reports the loader of
    `make_loader`, a statement the edit left alone and no lint rendered."""
    lints = session("train.py")
    assert lints.check(_QUIET_UNTIL_MOVED) == check(_QUIET_UNTIL_MOVED, "train.py")
    assert lints.state.renders.statements_rendered == 0
    result = lints.check(_MOVED)
    assert result == check(_MOVED, "train.py") and result.findings
    assert not lints.state.parsed.whole_parses
    assert lints.state.renders.statements_rendered == 1


@pytest.mark.parametrize("seed", range(20))
def test_fix_all_from_kept_fixes_applies_every_safe_fix(seed):
    """Built from the kept lint (no lint of the result): every safe fix that
    `--fix` applies in its first pass, and the whole loop where fixes overlap."""
    rng = random.Random(5000 + seed)
    text = rng.choice(sources())
    for _ in range(3):
        text = edit(text, rng)
    lints = session("train.py")
    result = lints.check(text)
    fixed, edits = lints.fix_from_kept(text)
    if edits is not None:
        from torchlint.source.edits import apply_edits

        assert apply_edits(text, edits) == (fixed, len(edits))
    full, _ = fix_source(text, "train.py")
    safe = [f for f in result.findings if f.fix is not None and f.fix.applicability.value == "safe"]
    if not safe:
        assert fixed == text
    elif fixed != full:  # one pass from the kept fixes; --fix went on to fixes that appeared after it
        from torchlint.source.edits import apply_fix_groups

        assert (fixed, len(safe)) == apply_fix_groups(text, [f.fix.edits for f in safe])
        assert fix_source(fixed, "train.py")[0] == full


def test_notebook_fix_all_from_kept_fixes_equals_the_fix_loop():
    cell_sources = ["import torch\ndevice = torch.device('cuda')\n"] + [
        f"x{i} = torch.zeros({i + 1}).to(device)\nprint(x{i})\n" for i in range(30)
    ]
    text = _notebook_text(cell_sources)
    lints = session("nb.ipynb", PREVIEW)
    lints.check(text)
    fixed, edits = lints.fix_from_kept(text)
    assert edits is None and fixed != text
    assert fixed == fix_source(text, "nb.ipynb", PREVIEW)[0]
