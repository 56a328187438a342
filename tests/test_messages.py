"""What findings say: every message a rule prints reads as a sentence
(capitalised, no leftover template, no "but ... but"), on every rule's
examples and on the repository's fixtures and examples."""

import pytest

from torchlint.rules import all_rules

from helpers import lint_source, repo_sources

RULES = all_rules()


def _messages():
    out = []
    for rule in RULES:
        for ex in rule.INVALID:
            out += [(rule.CODE, f.message) for f in lint_source(ex.code, "t.py") if f.code == rule.CODE]
    for name, text in repo_sources():
        out += [(f.code, f.message) for f in lint_source(text, name)]
    return out


MESSAGES = _messages()


def test_there_are_messages_of_every_rule():
    assert {code for code, _ in MESSAGES} >= {r.CODE for r in RULES if r.INVALID}


@pytest.mark.parametrize("code,message", sorted(set(MESSAGES)))
def test_message_reads_as_a_sentence(code, message):
    assert message[:1].isupper() or message[:1] == "`", f"{code} message starts lower-case: {message}"
    assert "{" not in message and "}" not in message, f"{code} message has a template left: {message}"
    assert message.count(" but ") <= 1, f"{code} message says 'but' twice: {message}"


def test_tl401_condition_message_is_capitalised():
    """Issue 27: "a tensor used as a condition syncs ..." started lower-case."""
    src = (
        "import torch\ndevice = torch.device('cuda')\nmodel = torch.nn.Linear(2, 2).to(device)\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for x in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    opt.step()\n"
        "    if loss < 0.1:\n        break\n"
    )
    (f,) = [f for f in lint_source(src, "t.py") if f.code == "TL401"]
    assert f.message.startswith("A tensor used as a condition syncs host and device every iteration of the loop")


def test_tl101_crash_message_says_but_once():
    """Issue 27: "... is used but never moved to the device, but its inputs are ..."."""
    src = "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\nmodel = nn.Linear(4, 2)\nout = model(x.to(device))\n"
    (f,) = [f for f in lint_source(src, "t.py") if f.code == "TL101"]
    assert f.message == (
        "Model `model` is used without being moved to the device, but its inputs are on the device: "
        "the forward fails with a device mismatch"
    )
