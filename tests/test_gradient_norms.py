"""`clip_grad_norm_(model.parameters(), ...)` returns the gradients' total norm
as a tensor where the parameters are: read on the host every step
(`total += grad_norm.item()`), it syncs with the device (the round-9 row
NoeFlandre `models/lenet/scripts/train.py:183`); where the model stays on the
CPU it does not."""

from helpers import lint_source

GPU = "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\n"
LOOP = (
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "total = 0.0\n"
    "for step, (x, y) in enumerate(loader):\n"
    "    loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))\n"
    "    loss.backward()\n"
    "    grad_norm = torch.nn.utils.clip_grad_norm_({params}, max_norm=1.0)\n"
    "{read}"
    "    opt.step()\n"
)
READ = "    total += grad_norm.item()\n"


def syncs(src: str):
    return [f.row for f in lint_source(src, "train.py") if f.code == "TL401"]


def test_the_norm_of_a_moved_models_gradients_read_every_step_is_a_sync():
    src = GPU + "model = nn.Linear(4, 2).to(device)\n" + LOOP.format(params="model.parameters()", read=READ)
    assert syncs(src) == [11]


def test_the_norm_through_an_imported_name_and_a_keyword():
    src = (
        GPU
        + "from torch.nn.utils import clip_grad_norm_\nmodel = nn.Linear(4, 2).to(device)\n"
        + LOOP.replace(
            "torch.nn.utils.clip_grad_norm_({params}", "clip_grad_norm_(parameters=model.parameters()"
        ).format(read=READ)
    )
    assert "clip_grad_norm_(parameters=model.parameters()" in src
    assert syncs(src) == [12]


def test_the_norm_of_a_model_left_on_the_cpu_is_no_sync():
    # the file selects a device for the batches, but the model is never moved: its norm is a CPU tensor
    src = GPU + "model = nn.Linear(4, 2)\n" + LOOP.format(params="model.parameters()", read=READ)
    assert syncs(src) == []


def test_the_norm_read_now_and_then_or_kept_on_the_device_is_silent():
    periodic = "    if step % 100 == 0:\n        print(grad_norm.item())\n"
    kept = "    total += grad_norm.detach()\n"
    for read in (periodic, kept):
        src = GPU + "model = nn.Linear(4, 2).to(device)\n" + LOOP.format(params="model.parameters()", read=read)
        assert syncs(src) == [], read
