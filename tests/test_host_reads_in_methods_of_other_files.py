"""Host reads inside methods of another file's classes: a metrics object built in
the training file (`dice = metrics.DiceAverage(n)`) whose `update(output, target)`
reads what it is handed on the host every call (round 8: lee-zq/3DUNet-Pytorch
train.py:30, :58 via utils/metrics.py). TL401 at the call, where the argument is
on the accelerator; silent where the method keeps the tensor, reads it only on
some calls, or is handed host values."""

from torchlint.analysis.project.kinds import MethodBinding
from torchlint.analysis.project.summary import summarize

from helpers import lint_in_project

_METRICS = """\
import numpy as np
import torch

class DiceAverage(object):
    def __init__(self, class_num):
        self.class_num = class_num
        self.sum = np.zeros(class_num)
        self.count = 0

    def update(self, logits, targets):
        self.value = DiceAverage.get_dices(logits, targets)
        self.sum += self.value
        self.count += 1

    @staticmethod
    def get_dices(logits, targets):
        dices = []
        for class_index in range(targets.size()[1]):
            inter = torch.sum(logits[:, class_index] * targets[:, class_index])
            union = torch.sum(logits[:, class_index]) + torch.sum(targets[:, class_index])
            dice = (2.0 * inter + 1) / (union + 1)
            dices.append(dice.item())
        return np.asarray(dices)

class LossAverage(object):
    def __init__(self):
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n

    def average(self):
        return self.sum.item() / self.count
"""

_TRAIN = """\
import torch
from utils import metrics

device = torch.device("cuda")

def train(model, loader, optimizer, n_labels):
    dice = metrics.DiceAverage(n_labels)
    for data, target in loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = (output - target).pow(2).mean()
        loss.backward()
        optimizer.step()
        dice.update(output, target)
    return dice.sum

if __name__ == "__main__":
    net = torch.nn.Linear(4, 4).to(device)
    train(net, torch.utils.data.DataLoader(list(range(8))), torch.optim.SGD(net.parameters()), 2)
"""

_CALL = "        dice.update(output, target)\n"


def _tl401_lines(tmp_path, metrics: str = _METRICS, train: str = _TRAIN) -> list:
    files = {"utils/__init__.py": "", "utils/metrics.py": metrics, "train.py": train}
    return [f.row for f in lint_in_project(tmp_path, files, "train.py") if f.code == "TL401"]


def _line_of(text: str, line: str) -> int:
    return text.splitlines(keepends=True).index(line) + 1


def test_a_metrics_method_of_another_file_reading_its_argument_every_step(tmp_path):
    # the method hands the tensor to a static method of its class that reads it per class
    assert _tl401_lines(tmp_path) == [_line_of(_TRAIN, _CALL)]


def test_a_metrics_method_that_keeps_the_tensor_reads_nothing(tmp_path):
    # `LossAverage.update(loss)`: `self.sum += val * n` adds the tensor up on the device
    # (the class reads `self.sum` on the host in `average()`, not what `update` is handed)
    train = _TRAIN.replace("metrics.DiceAverage(n_labels)", "metrics.LossAverage()")
    assert _tl401_lines(tmp_path, train=train.replace(_CALL, "        dice.update(loss, data.size(0))\n")) == []


def test_a_read_on_some_calls_only_is_silent(tmp_path):
    # the read sits under an `if` on a setting: it runs only when the flag is set
    metrics = _METRICS.replace(
        "    def update(self, logits, targets):\n        self.value = DiceAverage.get_dices(logits, targets)\n",
        "    def update(self, logits, targets):\n        if self.verbose:\n"
        "            self.value = DiceAverage.get_dices(logits, targets)\n",
    )
    assert _tl401_lines(tmp_path, metrics=metrics) == []


_METER_OF_ANY_VALUE = """\
import torch

class AverageMeter:
    def __init__(self):
        self.sum = 0.0

    def update(self, val, n=1):
        if isinstance(val, torch.Tensor):
            val = val.item()
        self.sum += val * n
"""


def test_a_read_under_a_test_of_the_arguments_type_runs_every_call(tmp_path):
    # `if isinstance(val, torch.Tensor): val = val.item()`: handed a tensor, the branch is taken every call
    train = _TRAIN.replace("metrics.DiceAverage(n_labels)", "metrics.AverageMeter()")
    train = train.replace(_CALL, "        dice.update(loss, data.size(0))\n")
    line = _line_of(train, "        dice.update(loss, data.size(0))\n")
    assert _tl401_lines(tmp_path, metrics=_METER_OF_ANY_VALUE, train=train) == [line]
    # the read on the branch a tensor does not take: not a read of what the loop hands it
    other = _METER_OF_ANY_VALUE.replace("if isinstance(val, torch.Tensor):", "if not isinstance(val, torch.Tensor):")
    assert _tl401_lines(tmp_path, metrics=other, train=train) == []
    # a test of the argument's shape: which branch a call takes is not known
    shaped = _METER_OF_ANY_VALUE.replace("if isinstance(val, torch.Tensor):", "if val.dim() == 0:")
    assert _tl401_lines(tmp_path, metrics=shaped, train=train) == []


def test_a_read_after_an_early_return_runs_on_some_calls(tmp_path):
    metrics = _METRICS.replace(
        "    def update(self, logits, targets):\n",
        "    def update(self, logits, targets, verbose=False):\n        if not verbose:\n            return\n",
    )
    assert _tl401_lines(tmp_path, metrics=metrics) == []


def test_a_subclass_overriding_the_method_reads_what_its_own_method_reads(tmp_path):
    # `Dice(DiceAverage)` overrides `update` without reading: the base's read is not run
    plain = _METRICS + "\nclass Dice(DiceAverage):\n    def update(self, logits, targets):\n        self.count += 1\n"
    train = _TRAIN.replace("metrics.DiceAverage(n_labels)", "metrics.Dice(n_labels)")
    assert _tl401_lines(tmp_path, metrics=plain, train=train) == []
    # it overrides the static method the base's `update` calls through `self`
    via_self = _METRICS.replace("DiceAverage.get_dices(logits, targets)", "self.get_dices(logits, targets)")
    quiet = via_self + (
        "\nclass Dice(DiceAverage):\n    @staticmethod\n    def get_dices(logits, targets):\n        return logits.sum()\n"
    )
    assert _tl401_lines(tmp_path, metrics=quiet, train=train) == []


def test_host_values_handed_to_the_method_are_no_sync(tmp_path):
    # the same training on the CPU: the method reads host tensors
    train = _TRAIN.replace('torch.device("cuda")', 'torch.device("cpu")')
    assert _tl401_lines(tmp_path, train=train) == []


def test_a_method_reached_through_self_and_one_inherited_from_a_project_base(tmp_path):
    via_self = _METRICS.replace("DiceAverage.get_dices(logits, targets)", "self.get_dices(logits, targets)")
    assert _tl401_lines(tmp_path, metrics=via_self) == [_line_of(_TRAIN, _CALL)]
    inherited = _METRICS + "\nclass Dice(DiceAverage):\n    pass\n"
    train = _TRAIN.replace("metrics.DiceAverage(n_labels)", "metrics.Dice(n_labels)")
    assert _tl401_lines(tmp_path, metrics=inherited, train=train) == [_line_of(train, _CALL)]


def test_a_receiver_bound_to_two_different_things_is_unknown(tmp_path):
    train = _TRAIN.replace(
        "    dice = metrics.DiceAverage(n_labels)\n",
        "    dice = metrics.DiceAverage(n_labels)\n    if n_labels == 1:\n        dice = metrics.LossAverage()\n",
    )
    assert _tl401_lines(tmp_path, train=train) == []


def test_method_summaries_leave_out_the_bound_parameter():
    summary = summarize(_METRICS)
    methods = {m.function.name: m for c in summary.classes for m in c.methods if c.name == "DiceAverage"}
    assert set(methods) == {"update", "get_dices"}  # `__init__` is not summarised
    assert methods["update"].binding is MethodBinding.INSTANCE
    assert methods["update"].function.params == ("logits", "targets")
    assert methods["get_dices"].binding is MethodBinding.STATIC
    assert methods["get_dices"].function.syncs == (("logits", "item"),)
