"""TL201 missing-no-grad: longer positive, negative and fix cases."""

import textwrap

import libcst as cst

from helpers import fix_source, lint_source


def rows(src, code="TL201", path="example.py"):
    return [f.row for f in lint_source(textwrap.dedent(src), path) if f.code == code]


def fixed(src):
    out, _ = fix_source(textwrap.dedent(src), "example.py", unsafe=True)
    return out


PRETRAINED = """\
import torch
from transformers import AutoModel
model = AutoModel.from_pretrained("bert")
"""


def test_pretrained_model_in_file_that_never_trains():
    assert rows(PRETRAINED + "for inputs in batches:\n    out = model(**inputs)\n") == [5]


def test_a_single_forward_that_runs_once_is_silent():
    """One forward, once per run (a script's one prediction, a test after
    training, a notebook's look at one batch): one graph, nothing per step."""
    assert rows(PRETRAINED + "out = model(**inputs)\n") == []
    helper = PRETRAINED + "def predict(x):\n    print(model(x))\n"
    assert rows(helper + "predict(inputs)\n") == []
    # A helper called from a loop, or from several places, is not a one-off.
    assert rows(helper + "for x in batches:\n    predict(x)\n") == [5]
    assert rows(helper + "predict(a)\npredict(b)\n") == [5]
    # A helper handed on as a value (a callback) may run anywhere.
    assert rows(helper + "predict(a)\nrun_later(predict)\n") == [5]
    # After training, one test forward is one graph.
    trained = PRETRAINED + "for b in batches:\n    model(**b).loss.backward()\nmodel.eval()\nout = model(**test)\n"
    assert rows(trained) == []


def test_pretrained_model_with_training_is_not_inference():
    src = PRETRAINED + "out = model(**inputs)\nout.loss.backward()\nopt.step()\n"
    assert rows(src) == []


def test_checkpoint_loaded_model():
    src = "import torch\nimport torch.nn as nn\nnet = nn.Linear(2, 2)\nnet.load_state_dict(torch.load('w.pt'))\n"
    assert rows(src + "for x in xs:\n    y = net(x)\n") == [6]
    src = "import torch\nmodel = torch.load('m.pt')\nfor x in xs:\n    y = model(x)\n"
    assert rows(src) == [4]


def test_torchvision_pretrained_weights():
    src = "import torch\nimport torchvision\nm = torchvision.models.resnet18(weights='DEFAULT')\nfor x in xs:\n    y = m(x)\n"
    assert rows(src) == [5]
    src = "import torch\nimport torchvision\nm = torchvision.models.resnet18()\nfor x in xs:\n    y = m(x)\n"
    assert rows(src) == []


def test_fresh_local_model_in_hot_loop_without_backward_is_silent():
    src = """\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def forward(self, x):
            return x
    model = Net()
    for i in range(10):
        out = model(torch.randn(2, 2))
    """
    assert rows(src) == []


def test_after_eval_until_train():
    src = """\
    import torch
    import torch.nn as nn
    model = nn.Linear(2, 2)
    def run(loader, opt):
        for epoch in range(3):
            model.train()
            for x in loader:
                model(x).sum().backward()
                opt.step()
            model.eval()
            for x in loader:
                val = model(x)
    """
    assert rows(src) == [12]


def test_eval_then_train_in_same_loop():
    # Within each iteration the forward runs between .eval() and .train().
    src = """\
    import torch.nn as nn
    model = nn.Linear(2, 2)
    for x in data:
        model.train()
        model(x).sum().backward()
        model.eval()
        y = model(x)
        model.train()
    """
    assert rows(src) == [7]


def test_eval_before_loop_and_train_inside_is_not_inference():
    src = """\
    import torch.nn as nn
    model = nn.Linear(2, 2)
    model.eval()
    for x in data:
        y = model(x)
        model.train()
    """
    assert rows(src) == []


def test_guards_with_decorator_and_callers():
    for guard in ("with torch.no_grad():", "with torch.inference_mode():", "with torch.set_grad_enabled(False):"):
        src = f"import torch\nimport torch.nn as nn\nm = nn.Linear(2, 2)\nm.eval()\n{guard}\n    y = m(x)\n"
        assert rows(src) == [], guard
    for deco in ("@torch.no_grad()", "@torch.no_grad", "@torch.inference_mode()", "@torch.inference_mode"):
        src = f"import torch\nimport torch.nn as nn\nm = nn.Linear(2, 2)\n{deco}\ndef evaluate(x):\n    return m(x)\n"
        assert rows(src) == [], deco


def test_set_grad_enabled_true_is_not_a_guard():
    src = "import torch\nimport torch.nn as nn\nm = nn.Linear(2, 2)\nm.eval()\nwith torch.set_grad_enabled(True):\n    y = m(x)\n"
    assert rows(src) == []  # gradients explicitly on: the author wants them


def test_helper_called_from_guarded_and_unguarded_regions():
    src = """\
    import torch
    import torch.nn as nn
    m = nn.Linear(2, 2)
    m.load_state_dict(torch.load("m.pt"))
    def predict(x):
        return m(x)
    with torch.no_grad():
        predict(1)
    predict(2)
    """
    assert rows(src) == [6]


def test_inference_function_whose_result_is_backpropagated():
    src = """\
    import torch.nn as nn
    m = nn.Linear(2, 2)
    def predict(x):
        return m(x)
    loss = predict(1).sum()
    loss.backward()
    """
    assert rows(src) == []


def test_pytest_test_functions_in_test_files_are_not_inference():
    src = "import torch\ndef test_shape():\n    m = torch.load('m.pt')\n    m.eval()\n    assert m(x).shape\n"
    assert rows(src, path="tests/test_model.py") == []
    # A `test_*` function with no loop over data is a unit test wherever it lives ...
    assert rows(src, path="model.py") == []
    # ... while `test(model, loader)` walking a test set is an evaluation.
    ev = "import torch\ndef test(model, loader):\n    model.eval()\n    for x, y in loader:\n        out = model(x)\n"
    assert rows(ev, path="model.py") == [5]


def test_submodule_calls_inside_model_are_not_reported():
    src = """\
    import torch
    import torch.nn as nn
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)
        def generate(self, x):
            return self.fc(x)
    """
    assert rows(src) == []


def test_fix_converges_for_two_forwards_in_one_loop():
    src = """\
    import torch
    import torch.nn as nn
    m = nn.Linear(2, 2)
    m.load_state_dict(torch.load("m.pt"))
    m.eval()
    for x in data:
        a = m(x)
        b = m(a)
    """
    out = fixed(src)
    assert out.count("no_grad") == 1
    cst.parse_module(out)
    assert rows(out) == []
    assert fixed(out) == out


def test_a_single_forward_in_a_branch_is_reported_without_a_fix():
    """One forward records one graph: the finding stands, the edit would gain nothing measurable."""
    src = PRETRAINED + "def predict(inputs):\n    if ok:\n        # go\n        out = model(**inputs)\n"
    src += "predict(a)\npredict(b)\n"
    (finding,) = [f for f in lint_source(src, "e.py") if f.code == "TL201"]
    assert finding.fix is None
    assert fixed(src) == src


def test_fix_wraps_statement_in_branch_inside_a_loop():
    src = PRETRAINED + "for inputs in batches:\n    if ok:\n        # go\n        out = model(**inputs)\n"
    out = fixed(src)
    assert "with torch.no_grad():\n    for inputs in batches:\n" in out


def test_no_fix_without_torch_import():
    src = "import torch.nn as nn\nfrom torch import load\nm = nn.Linear(2, 2)\nm.load_state_dict(load('m.pt'))\nm.eval()\n"
    src += "def predict(x):\n    return m(x)\npredict(a)\npredict(b)\n"
    found = [f for f in lint_source(src, "e.py") if f.code == "TL201"]
    assert found and found[0].fix is None


def test_lightning_steps_are_run_without_grad_by_the_trainer():
    src = """\
    import torch
    import torch.nn as nn
    import lightning as L
    net = nn.Linear(2, 2)
    class Module(L.LightningModule):
        def validation_step(self, batch, idx):
            return net(batch)
    """
    assert rows(src) == []


def test_loss_module_is_not_a_model_forward():
    src = (
        "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ncrit = nn.MSELoss()\ndef evaluate(x, y):\n"
        "    with torch.no_grad():\n        out = model(x)\n    return crit(out, y)\n"
    )
    assert rows(src) == []


def test_fix_converges_for_forwards_in_nested_loops():
    src = """\
    import torch
    import torch.nn as nn
    m = nn.Linear(2, 2)
    m.load_state_dict(torch.load("m.pt"))
    m.eval()
    for chunk in chunks:
        for x in chunk:
            a = m(x)
        b = m(chunk)
    """
    out = fixed(src)
    assert out.count("no_grad") == 1
    assert "with torch.no_grad():\n    for chunk in chunks:\n" in out
    assert rows(out) == []


def test_global_set_grad_enabled_false_guards_the_file():
    src = PRETRAINED + "torch.set_grad_enabled(False)\nout = model(**inputs)\n"
    assert rows(src) == []


def test_train_false_is_eval():
    src = (
        "import torch\nimport torch.nn as nn\nm = nn.Linear(2, 2)\nm.load_state_dict(torch.load('m.pt'))\nm.train(False)\n"
        "for x in loader:\n    y = m(x)\n"
    )
    assert rows(src) == [7]


def test_volatile_variable_is_named_in_the_message():
    src = """\
    import torch
    from torch.autograd import Variable
    def test(model, loader):
        model.eval()
        for data, target in loader:
            data, target = Variable(data, volatile=True), Variable(target)
            output = model(data)
    """
    found = [f for f in lint_source(textwrap.dedent(src), "example.py") if f.code == "TL201"]
    assert [f.row for f in found] == [7]
    assert "volatile=True)` has had no effect since PyTorch 0.4" in found[0].message


def test_shape_check_before_training_is_a_demo():
    src = """\
    import torch
    from mypkg import EncoderRNN
    def test():
        out = encoder(torch.zeros(1, 5))
        print(out.size())
    encoder = EncoderRNN(8)
    opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
    test()
    for x, y in loader:
        loss = (encoder(x) - y).pow(2).mean()
        loss.backward()
        opt.step()
    """
    assert rows(src) == []


def test_grad_disabled_inside_the_evaluation_helper():
    src = """\
    import torch
    def test(net, loader):
        net.eval()
        torch.set_grad_enabled(False)
        for x in loader:
            out = net(x)
    if __name__ == "__main__":
        net, _ = load_model(args)
        test(net, loader)
    """
    assert rows(src) == []


def test_an_inference_script_s_own_forward_is_its_work():
    """A .py script that never trains runs a pretrained model on its input:
    every run of the script is that forward, on the accelerator it selects."""
    src = PRETRAINED + "if torch.cuda.is_available():\n    model.to('cuda')\nout = model(**inputs)\n"
    assert rows(src) == [6]
    # The same model left on the CPU (never moved, or moved to the CPU only) runs on the CPU.
    cpu = PRETRAINED + "device = torch.device('cuda')\nx = inputs.to(device)\nout = model(**inputs)\n"
    assert rows(cpu) == []
    assert rows(PRETRAINED + "model.to('cpu')\nout = model(**inputs)\n") == []


_SHARED_STEP = """\
import torch
model = torch.load("m.pt").cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def step_loss(x):
    return model(x.cuda()).sum()
def fit():
    for x in train_loader:
        loss = step_loss(x)
        loss.backward()
        opt.step()
def run_eval():
    with torch.no_grad():
        for x in val_loader:
            print(step_loss(x).item())
fit()
run_eval()
"""


def test_an_evaluation_helper_whose_loop_calls_the_shared_step_under_no_grad():
    """`run_eval` reaches the forward through `step_loss`, which training shares,
    but calls it inside `with torch.no_grad():`: nothing there records a graph."""
    assert rows(_SHARED_STEP) == []
    unguarded = _SHARED_STEP.replace("    with torch.no_grad():\n        for", "    if True:\n        for")
    assert rows(unguarded) == [16]


_TWO_EVALS = """\
import torch
model = torch.load("m.pt").cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def model_eval(loader):
    correct = 0
    for x, y in loader:
        correct += (model(x.cuda()).argmax(1) == y.cuda()).sum()
    return correct
for epoch in range(3):
    for x, y in train_loader:
        model(x.cuda()).sum().backward()
        opt.step()
    train_acc = model_eval(train_loader)
    dev_acc = model_eval(dev_loader)
test_acc = model_eval(test_loader)
"""


def test_one_finding_per_evaluation_helper_in_a_loop():
    """Two calls of the same unguarded helper in one epoch are one root cause;
    a call elsewhere (after the loop) is its own finding."""
    assert rows(_TWO_EVALS) == [13, 15]


_PPE = """\
import torch
from pytorch_pfn_extras.training import extensions as ppe_extensions
model = torch.load("m.pt").cuda()
def eval_for_batch(model, data, target):
    model.eval()
    out = model(data.cuda())
    return out
ext = ppe_extensions.Evaluator(
    val_loader,
    model,
    {keyword}=lambda data, target: eval_for_batch(model, data, target),
)
"""


def test_a_function_handed_as_eval_func_to_an_evaluator_runs_without_autograd():
    """pytorch_pfn_extras' Evaluator runs its `eval_func` under no_grad."""
    assert rows(_PPE.format(keyword="eval_func")) == []
    # another keyword of it (a hook, a metric) is not run under its no_grad
    assert rows(_PPE.format(keyword="metric_fn")) == [6]
