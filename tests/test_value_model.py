"""The value model's four answers (torchlint/analysis/value_model.py) on small programs."""

from __future__ import annotations

import textwrap

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from torchlint.analysis import Analysis
from torchlint.analysis.value_model import AbstractValue, Graph, How, What, Where


def value_of(source: str, line: int, text: str) -> AbstractValue:
    """The value of the argument or receiver `text` of a call on `line`."""
    source = textwrap.dedent(source)
    module = cst.parse_module(source)
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    a = Analysis(module, "train.py", source)
    for call in a.facts.calls:
        pos = positions.get(call.node)
        if pos is None or pos.start.line != line:
            continue
        candidates = [arg.value for arg in call.node.args]
        if call.receiver is not None:
            candidates.append(call.receiver)
        for expr in candidates:
            if module.code_for_node(expr) == text:
                return a.value_model.at(expr, call.site)
    raise AssertionError(f"no {text!r} on line {line}")


TRAIN = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(dataset, batch_size=32)
for epoch in range(10):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        print(loss.item())
        if step % 100 == 0:
            print(loss.item())
    torch.save(model.state_dict(), "m.pt")
"""


def test_a_loss_in_the_training_loop_is_a_tensor_on_the_accelerator_with_a_graph_every_step():
    v = value_of(TRAIN, 15, "loss")
    assert v == AbstractValue(What.TENSOR, Where.ACCELERATOR, Graph.CARRIES, How.PER_STEP)


def test_a_moved_model_is_a_module_on_the_accelerator():
    v = value_of(TRAIN, 18, "model")
    assert (v.what, v.where) == (What.MODULE, Where.ACCELERATOR)


def test_a_read_under_a_periodic_guard_runs_now_and_then():
    assert value_of(TRAIN, 17, "loss").how is How.PERIODIC


def test_a_statement_of_the_epoch_loop_runs_once_per_epoch():
    assert value_of(TRAIN, 18, "model").how is How.PER_EPOCH


def test_a_loader_is_a_loader_and_a_literal_is_host_data():
    assert value_of(TRAIN, 8, "dataset").what is What.UNKNOWN  # an unknown name stays unknown
    v = value_of(TRAIN, 5, '"cuda"')
    assert (v.what, v.where, v.graph, v.how) == (What.HOST_DATA, Where.HOST, Graph.NONE, How.ONCE)


CPU_ONLY = """\
import torch

ids = torch.arange(10)
for i in range(100):
    t = ids.mul(2)
    print(t.sum().item())
with torch.no_grad():
    out = torch.ones(3)
    print(out.sum())
"""


def test_a_tensor_made_on_the_host_is_on_the_host():
    v = value_of(CPU_ONLY, 5, "ids")
    assert (v.what, v.where) == (What.TENSOR, Where.HOST)


def test_under_no_grad_a_tensor_carries_no_graph():
    assert value_of(CPU_ONLY, 9, "out").graph is Graph.NONE


def test_what_the_analysis_cannot_tell_stays_unknown():
    v = value_of("import torch\n\ndef f(x):\n    return torch.relu(x)\n", 4, "x")
    assert v.where is Where.UNKNOWN and v.graph is Graph.UNKNOWN
