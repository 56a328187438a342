"""TL401 sync-in-loop and TL402 tensor-python-loop."""

import textwrap

import libcst as cst

from helpers import fix_source, lint_source

# A model on the GPU: its outputs (and losses computed from them) live there.
HEAD = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2).cuda()\ncriterion = nn.MSELoss()\n"
# A CPU-only script: the same code syncs nothing.
CPU_HEAD = "import torch\nimport torch.nn as nn\nmodel = nn.Linear(2, 2)\ncriterion = nn.MSELoss()\n"


def rows(src, code):
    return [f.row for f in lint_source(textwrap.dedent(src), "example.py") if f.code == code]


def train(body, after=""):
    lines = [
        "total = 0.0",
        "for step, (x, y) in enumerate(loader):",
        "    loss = criterion(model(x), y)",
        "    loss.backward()",
        "    optimizer.step()",
    ]
    lines += ["    " + b for b in body.splitlines()]
    return HEAD + "\n".join(lines) + "\n" + after


def test_tl401_item_tolist_casts():
    assert rows(train("v = loss.item()"), "TL401") == [10]
    assert rows(train("v = loss.tolist()"), "TL401") == [10]
    for cast in ("float", "int", "bool"):
        assert rows(train(f"v = {cast}(loss)"), "TL401") == [10], cast


def test_tl401_training_only_calls():
    assert rows(train("v = loss.detach().cpu().numpy()"), "TL401") == [10]  # one finding for the chain
    assert rows(train("print(loss)"), "TL401") == [10]
    assert rows(train("print(f'{loss:.3f}')"), "TL401") == [10]


def test_tl401_inference_loop_cpu_collection_is_silent():
    src = HEAD + "outs = []\nfor x in loader:\n    with torch.no_grad():\n        outs.append(model(x).cpu().numpy())\n"
    assert rows(src, "TL401") == []


def test_tl401_periodic_guard_and_after_loop():
    assert rows(train("if step % 50 == 0:\n    print(loss.item())"), "TL401") == []
    assert rows(train("if (step + 1) % cfg.log_every == 0:\n    print(float(loss))"), "TL401") == []
    assert rows(train("pass", after="print(loss.item())\n"), "TL401") == []


def test_tl401_python_numbers_are_silent():
    body = (
        "lr = float(scheduler.get_last_lr()[0])\nfor group in optimizer.param_groups:\n    g = float(group['lr'])\n"
        "n = int(x.shape[0])\nk = len(y)"
    )
    assert rows(train(body), "TL401") == []


def test_tl401_cpu_tensor_is_silent():
    assert rows(train("w = torch.ones(3).sum().item()"), "TL401") == []


def test_tl401_cpu_only_script_is_silent():
    src = (
        CPU_HEAD + "total = 0.0\nfor x, y in loader:\n    loss = criterion(model(x), y)\n    loss.backward()\n"
        "    total += loss.item()\n    if loss < 0.01:\n        break\n"
    )
    assert rows(src, "TL401") == []


def test_tl401_once_per_epoch_is_silent():
    src = (
        HEAD + "for epoch in range(3):\n    for x, y in loader:\n        loss = criterion(model(x), y)\n"
        "        loss.backward()\n    val = criterion(model(xv), yv)\n    print(val.item())\n"
    )
    assert rows(src, "TL401") == []


def test_tl401_helper_loss_and_parameter_criterion():
    src = """\
    import torch
    def calc_loss(x, y, model, device):
        x, y = x.to(device), y.to(device)
        return torch.nn.functional.cross_entropy(model(x), y)
    def train(model, loader, device, crit):
        for x, y in loader:
            loss = calc_loss(x, y, model, device)
            loss.backward()
            print(loss.item())
            out = model(x.to(device))
            l2 = crit(out, y.to(device))
            print(l2.item())
    """
    assert rows(src, "TL401") == [9, 12]


def test_tl401_metric_tensors():
    src = (
        HEAD
        + "correct = 0\nfor x, y in loader:\n    pred = model(x).argmax(1)\n    correct += (pred == y).sum().item()\n"
    )
    assert rows(src, "TL401") == [8]


def test_tl401_tensor_condition():
    assert rows(train("if loss < 0.01:\n    break"), "TL401") == [10]
    assert rows(train("if loss is None:\n    break"), "TL401") == []


def test_tl401_helper_called_every_iteration():
    src = (
        HEAD + "def log(v):\n    return v.item()\nfor x in loader:\n    loss = criterion(model(x), x)\n"
        "    loss.backward()\n    log(loss)\n"
    )
    assert rows(src, "TL401") == [10]  # at the call, every iteration
    src = (
        HEAD + "def log(v):\n    return v.item()\nfor i, x in enumerate(loader):\n    loss = criterion(model(x), x)\n"
        "    loss.backward()\n    if i % 100 == 0:\n        log(loss)\n"
    )
    assert rows(src, "TL401") == []


def test_tl401_accumulation_fix():
    src = train("total += loss.item()", after="print(total / len(loader))\n")
    out, remaining = fix_source(src, "e.py", unsafe=True)
    assert "    total += loss.detach().double()\n" in out  # float64, as the Python float sum was
    assert "\ntotal = float(total)\nprint(total / len(loader))\n" in out  # a number again after the loop
    assert not [f for f in remaining if f.code == "TL401"]
    cst.parse_module(out)
    assert fix_source(out, "e.py", unsafe=True)[0] == out


def test_tl401_accumulation_int_start_keeps_type():
    src = (
        HEAD
        + "correct = 0\nfor x, y in loader:\n    out = model(x)\n    correct += (out.argmax(1) == y).sum().item()\n"
        "acc = correct / 10\n"
    )
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert "    correct += (out.argmax(1) == y).sum().detach()\n" in out
    assert "\ncorrect = int(correct)\nacc = correct / 10" in out


def test_tl401_accumulation_int_start_with_a_loss_stays_a_float():
    """`test_loss = 0` then `+= loss.item()` was a float: the fix must not make it
    an int (truncating the loss), and `test_loss /= n` after the loop still works."""
    src = (
        HEAD + "def test(loader):\n    test_loss = 0\n    for x, y in loader:\n"
        "        test_loss += torch.nn.functional.nll_loss(model(x), y, reduction='sum').item()\n"
        "    test_loss /= len(loader.dataset)\n    print('{:.4f}'.format(test_loss))\n"
    )
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert "reduction='sum').detach().double()\n" in out
    assert "    test_loss = float(test_loss)\n    test_loss /= len(loader.dataset)\n" in out
    assert " int(" not in out


def test_tl401_accumulation_second_loop_converts_its_own_total():
    """The same name accumulated in two loops: each loop converts after itself,
    never `int(int(...))`."""
    src = (
        HEAD + "total = 0.0\nfor x, y in loader:\n    total += criterion(model(x), y).item()\nprint(total)\n"
        "total = 0.0\nfor x, y in loader:\n    total += criterion(model(x), y).item()\nprint(total)\n"
    )
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert out.count("total = float(total)\nprint(total)\n") == 2
    assert "float(float(" not in out
    assert fix_source(out, "e.py", unsafe=True)[0] == out


def test_tl401_no_fix_when_read_inside_loop():
    src = train("total += loss.item()\nprint(total)", after="print(total)\n")
    found = [f for f in lint_source(src, "e.py") if f.code == "TL401" and f.row == 10]
    assert found and found[0].fix is None


def test_tl402_parameter_passed_tensors():
    src = """\
    import torch
    def work(batch):
        out = []
        for item in batch:
            out.append(item.sum())
        return out
    work(torch.randn(8, 3, device="cuda"))
    work([1, 2, 3])
    """
    assert rows(src, "TL402") == []  # one caller passes a list: unknown
    assert rows(src.replace("    work([1, 2, 3])\n", ""), "TL402") == [4]


def test_tl402_negatives():
    src = """\
    import torch
    import torch.nn as nn
    layers = nn.ModuleList([nn.Linear(2, 2)])
    for layer in layers:
        x = layer(x)
    for p in model.parameters():
        p.data.mul_(0.9)
    t = torch.randn(5)
    for v in t.tolist():
        s = v * 2
    for i in range(0, len(t), 2):
        chunk = t[i:i + 2] * 2
    """
    assert rows(src, "TL402") == []


def test_tl402_size_loop_and_model_output():
    src = HEAD + "out = model(x)\nfor i in range(out.size(0)):\n    y = out[i] * 2\n"
    assert rows(src, "TL402") == [6]


def test_tl401_rl_acting_loop_is_silent():
    src = (
        HEAD + "obs = env.reset()\nwhile True:\n    q = model(obs)\n    action = q.argmax().item()\n"
        "    obs, r, done, info = env.step(action)\n"
    )
    assert rows(src, "TL401") == []


def test_tl401_tuple_returning_ops_are_not_tensors():
    src = HEAD + "for x in loader:\n    out = model(x)\n    for part in out.chunk(2):\n        y = part.sum()\n"
    assert rows(src, "TL402") == []


def test_tl402_model_outputs_that_may_be_tuples_are_silent():
    src = """\
    import torch
    from transformers import AutoModel
    model = AutoModel.from_pretrained("m")
    outputs = model(**inputs)
    for hs in outputs.hidden_states:
        pooled = hs.mean(dim=1)
    lstm_out = model(x)
    for part in lstm_out:
        y = part.sum()
    """
    assert rows(src, "TL402") == []


# -- TL402: loops that do no device work per element (round 8 causes) ----------------------

_PLOT = """\
import torch
device = torch.device("cuda")
def pick(labels):
    seen = {seen}
    first = []
    for idx, i in enumerate(labels):
        if i in seen:
            continue
        seen.add(i)
        first.append(idx)
    return first
for x, y in loader:
    out = model(x.to(device))
    pick(out.argmax(1))
    out.sum().backward()
"""


def test_tl402_membership_in_a_set_reads_nothing():
    # a tensor hashes by identity: `i in seen` of a set compares nothing, syncs nothing
    assert rows(_PLOT.format(seen="set()"), "TL402") == []
    assert rows(_PLOT.format(seen="{}"), "TL402") == []


def test_tl402_membership_in_a_list_compares_each_element():
    # `i in seen` of a list runs `==` on each entry: a device comparison and a host read each
    assert rows(_PLOT.format(seen="[]"), "TL402") == [6]


def test_tl402_in_a_script_that_selects_no_device():
    src = """\
    import torch
    returns = torch.tensor(rewards)
    returns = (returns - returns.mean()) / (returns.std() + 1e-6)
    for log_prob, R in zip(saved_log_probs, returns):
        policy_loss.append(-log_prob * R)
    """
    assert rows(src, "TL402") == []  # CPU tensors: no kernel launched, nothing waited for
    moved = src.replace("returns = torch.tensor(rewards)\n", "returns = torch.tensor(rewards).cuda()\n")
    assert rows(moved, "TL402") == [4]


def test_tl402_drawing_each_element_with_an_object_a_host_package_made():
    src = """\
    import torch
    from PIL import ImageDraw
    device = torch.device("cuda")
    scores, boxes = model(img.to(device))
    draw = ImageDraw.Draw(image)
    for score, box in zip(scores, boxes):
        draw.text((box[0], box[1]), "{:.2f}".format(score.item()))
    """
    assert rows(src, "TL402") == []  # the host values are what the drawing needs
    other = src.replace("draw = ImageDraw.Draw(image)", "draw = Canvas(image)")
    assert rows(other, "TL402") == [6]


def test_tl402_a_zip_with_a_few_known_partners_is_a_handful():
    src = """\
    import torch
    x = torch.randn(3, 64, 64, device="cuda")
    for t, m in zip(x, [0.485, 0.456, 0.406]):
        t.sub_(m)
    """
    assert rows(src, "TL402") == []  # three whole planes, not elements
    assert rows(src.replace("zip(x, [0.485, 0.456, 0.406])", "zip(x, means)"), "TL402") == [3]


def test_tl402_an_object_of_a_class_moved_whole_is_no_tensor():
    src = """\
    import torch
    from torch_geometric.datasets import GraphLandDataset
    device = torch.device("cuda")
    dataset = GraphLandDataset(root="data").to(device)
    targets = torch.cat([data.y for data in dataset])
    """
    assert rows(src, "TL402") == []  # a dataset of graphs: `.to()` moves every graph, it is no tensor
    unknown = src.replace('GraphLandDataset(root="data").to(device)', "load_targets().to(device)")
    unknown = unknown.replace("[data.y for data in dataset]", "[int(t) for t in dataset]")
    assert rows(unknown, "TL402") == [5]  # whatever it was, what `.to(device)` gives is a tensor here


def test_tl401_a_loss_unpacked_from_an_objects_method_and_backpropagated_is_a_device_tensor():
    src = """\
    import torch
    device = torch.device("cuda")
    model = Net().to(device)
    for x in loader:
        x = x.to(device)
        loss, estimates = diffusion.p_loss(model, x, args)
        loss.backward()
        optimiser.step()
        mean_loss.append(loss.data.cpu())
    """
    assert rows(src, "TL401") == [9]  # it reaches `.backward()`: a tensor, made from `x` on the device
    # the other part of the tuple never reaches `.backward()`: we cannot tell what it is
    assert rows(src.replace("loss.data.cpu()", "estimates.cpu()"), "TL401") == []


_GLOBAL_LABELS = """\
import torch
device = torch.device("cuda")
features, labels = load(path)
labels = labels.to(device)
def train():
    for i, x in enumerate(loader):
        target = labels[i].cpu()
        loss = model(x, target)
        loss.backward()
{call}
"""


def test_tl401_a_global_the_script_moved_before_calling_the_function_is_on_the_device():
    # `train()` runs after the module's last binding of `labels`: that is the value it reads
    assert rows(_GLOBAL_LABELS.format(call="train()"), "TL401") == [7]


def test_tl401_a_global_read_by_a_function_called_before_the_move_is_unknown():
    src = _GLOBAL_LABELS.format(call="").replace(
        "labels = labels.to(device)\n", "train()\nlabels = labels.to(device)\n"
    )
    assert rows(src, "TL401") == []  # the call sees the value `load` gave, which we cannot tell


_KERNEL = """\
import torch
from torch import nn
class Net(nn.Module):
    def forward(self, x):
        return x
def kernel(model: {ann}):
    eye = torch.eye(64, device="cuda")
    out = []
    for t in range(64):
        out.append(model.neuron(eye[t].unsqueeze(1)))
    return torch.stack(out)
"""


def test_tl402_a_module_named_by_a_forward_reference_runs_per_element():
    # `model: "Net"` is the same-file module: its submodule steps a recurrence through time
    assert rows(_KERNEL.format(ann='"Net"'), "TL402") == []
    assert rows(_KERNEL.format(ann='"Other"'), "TL402") == [9]  # not a module we know: small work per element


_SHADOWED = """\
import torch
from utils import loss
device = torch.device("cuda")
def val(model, loader, loss_func):
    for x, y in loader:
        out = model(x.to(device))
        {name} = loss_func(out, y.to(device))
        total.update({name}.item())
"""


def test_tl401_a_local_that_shadows_an_imported_module_is_the_local_value():
    # `loss` is the module `utils.loss` at module level, but inside `val` it is the batch's loss
    assert rows(_SHADOWED.format(name="loss"), "TL401") == [8]
    assert rows(_SHADOWED.format(name="batch_loss"), "TL401") == [8]


def test_a_call_of_the_imported_module_outside_the_shadowing_function_keeps_its_name():
    from torchlint.analysis.collect import collect_facts

    src = "from utils import loss\ndef f(loss):\n    return loss.item()\nloss.compute(1)\n"
    calls = {c.method: c.qualname for c in collect_facts(cst.parse_module(src)).calls}
    assert calls == {"item": None, "compute": "utils.loss.compute"}


_ONCE = """\
import torch
device = torch.device("cuda")
model = Net().to(device)
def kernel():
    eye = torch.eye(64)
    mem = torch.zeros(64)
    for t in range(64):
        mem = 0.9 * mem + eye[t]
    return mem
{call}
"""


def test_tl402_a_cpu_loop_that_runs_once_per_run_costs_nothing():
    # a plot's kernel, computed once by module code, on CPU tensors
    assert rows(_ONCE.format(call="c = kernel()"), "TL402") == []


def test_tl402_a_cpu_loop_called_every_step_still_holds_the_step_up():
    every_step = "for x in loader:\n    c = kernel()\n    model(x.to(device)).sum().backward()"
    assert rows(_ONCE.format(call=every_step), "TL402") == [7]
    handed_on = "dataset = Data(transform=kernel)\nc = kernel()"
    assert rows(_ONCE.format(call=handed_on), "TL402") == [7]  # handed on: called we cannot tell how often
