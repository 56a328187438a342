"""The textual pre-check skips analysis only where it cannot change findings."""

from __future__ import annotations

from pathlib import Path

import pytest

import torchlint.analysis
from torchlint.engine import pipeline
from torchlint.engine.precheck import could_matter, pattern_for
from torchlint.rules import all_codes, all_rules

from helpers import repo_sources

ROOT = Path(__file__).resolve().parents[1]
ALL = frozenset(all_codes())


def _corpus():
    out = []
    for rule in all_rules():
        out += [(f"{rule.CODE}-valid-{i}", s) for i, s in enumerate(rule.VALID)]
        out += [(f"{rule.CODE}-invalid-{i}", inv.code) for i, inv in enumerate(rule.INVALID)]
    return out + repo_sources()


CORPUS = _corpus()


@pytest.mark.parametrize("name,source", CORPUS, ids=[n for n, _ in CORPUS])
def test_findings_are_the_same_with_and_without_the_precheck(name, source):
    with_pre = pipeline.lint_text(source, name, ALL, precheck=True)
    without = pipeline.lint_text(source, name, ALL, precheck=False)
    assert with_pre.findings == without.findings


def test_rule_examples_that_flag_all_could_matter():
    for rule in all_rules():
        for inv in rule.INVALID:
            assert could_matter(inv.code), (rule.CODE, inv.code)


@pytest.mark.parametrize(
    "text",
    [
        "import torch\n",
        "from torchvision import models\n",
        "import torch as T\n",
        "model.cuda()\n",
        "x = x.to(dev)\n",
        "x = x.\\\n    to(dev)\n",
        "for batch in train_loader:\n    pass\n",
        "tok(s, return_tensors='pt')\n",
        "m = AutoModel.from_pretrained('bert')\n",
        "d = 'mps'\n",
        "loss.backward()\n",
        "total += loss.item()\n",
        "parser.add_argument('--bs', default=1)\n",
    ],
)
def test_torch_shaped_text_could_matter(text):
    assert could_matter(text)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "import os\nprint(os.getcwd())\n",
        "def add(a, b):\n    return a + b  # add two numbers to each other\n",
        "import json\njson.dumps({'jumps': 1})\n",
        "class Todo:\n    def toggle(self):\n        self.done = not self.done\n",
    ],
)
def test_plain_python_cannot_matter(text):
    assert not could_matter(text)


def test_rule_triggers_widen_the_pattern():
    class Widget:
        CODE = "TL999"
        TRIGGERS = r"\bwidget\b"

    assert not could_matter("make(widget)\n")
    assert could_matter("make(widget)\n", [Widget])
    assert pattern_for([Widget]).pattern.endswith(r"(?:\bwidget\b)")


@pytest.mark.parametrize(
    "source",
    [
        "def f(:\n    pass\n",
        "x = (1,\n",
        "print 'hello'\n",
        "\tif x:\n  y = 1\n",
    ],
)
def test_syntax_errors_are_still_reported_without_torch(source):
    fast = pipeline.lint_text(source, "plain.py", ALL, precheck=True)
    slow = pipeline.lint_text(source, "plain.py", ALL, precheck=False)
    assert [f.code for f in fast.findings] == ["TL000"]
    assert fast.findings == slow.findings


def test_plain_valid_file_has_no_findings_and_skips_the_analysis(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("facts should not be collected")

    monkeypatch.setattr(torchlint.analysis, "collect_facts", boom)
    skipped = pipeline.lint_text("import os\nx = 1\n", "p.py", ALL)
    assert skipped.findings == () and skipped.problems == ()
    # A torch file does reach the analysis (whose failure the pipeline reports as a problem).
    analysed = pipeline.lint_text("import torch\nx = 1\n", "p.py", ALL)
    assert [p.message for p in analysed.problems] == [
        "internal error in analysis: AssertionError: facts should not be collected"
    ]


NARROWED = [r for r in all_rules() if "may_report" in vars(r)]


@pytest.mark.parametrize("name,source", CORPUS, ids=[n for n, _ in CORPUS])
def test_a_rule_enabled_alone_finds_the_same_with_its_own_precheck(name, source):
    # `Rule.may_report` lets a run whose rules cannot report skip the file (TL303 needs a loader).
    for rule in NARROWED:
        enabled = frozenset({rule.CODE, "TL000"})
        with_pre = pipeline.lint_text(source, name, enabled, precheck=True)
        without = pipeline.lint_text(source, name, enabled, precheck=False)
        assert with_pre.findings == without.findings, rule.CODE


def test_a_rule_may_narrow_the_precheck():
    loader = next(r for r in NARROWED if r.CODE == "TL303")
    view = torchlint.analysis.project.ProjectIndex.empty().view("a.py")
    assert loader.may_report("from torch.utils.data import DataLoader as DL\n", view)
    assert not loader.may_report("import torch\nx = torch.zeros(2, device='cuda')\n", view)


def test_a_default_run_analyses_only_files_that_may_call_a_loader():
    # TL000 and TL001 come from the parse and the runner, never from `check`.
    view = torchlint.analysis.project.ProjectIndex.empty().view("a.py")
    default = [r for r in all_rules() if r.CODE in ("TL000", "TL001", "TL303")]
    assert not pipeline._may_report("import torch\nx = torch.zeros(2, device='cuda')\n", default, view)
    assert pipeline._may_report("import torch\nloader = make()\n", default, view)
