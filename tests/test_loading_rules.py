"""TL301 batch-size-one, TL302 loader-no-workers, TL303 loader-no-pin-memory."""

import textwrap

import libcst as cst

from torchlint.api import fix_source, lint_source


def rows(src, code):
    return [f.row for f in lint_source(textwrap.dedent(src), "example.py") if f.code == code]


HEAD = (
    "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nfrom torchvision.datasets import MNIST\n"
    "device = torch.device('cuda')\n"
)
# The loader's batches go to the device (TL302/TL303 report only loaders that are used).
LOOP = "for x, y in loader:\n    out = model(x.to(device))\n"


def test_tl301_name_feeding_batch_size_keyword():
    src = HEAD + "bs = 1\nloader = DataLoader(ds, batch_size=bs)\n" + LOOP
    assert rows(src, "TL301") == [6]  # where the batch size takes effect


def test_tl301_rebound_name_is_silent():
    src = HEAD + "bs = 1\nif big:\n    bs = 64\nloader = DataLoader(ds, batch_size=bs)\n"
    assert rows(src, "TL301") == []


def test_tl301_local_class_keyword_is_silent():
    src = "class Runner:\n    def __init__(self, batch_size=1):\n        pass\nbatch_size = 1\nr = Runner(batch_size=batch_size)\n"
    assert rows(src, "TL301") == []


def test_tl301_tensor_outside_hot_loop_is_silent():
    src = "import torch\nbatch_size = 1\nx = torch.randn(batch_size, 10)\n"
    assert rows(src, "TL301") == []


def test_tl301_online_rl_acting_is_silent():
    src = """\
    import gymnasium as gym
    import torch
    batch = 1
    env = gym.make("CartPole-v1")
    for t in range(100):
        h = torch.zeros(batch, 64)
        action = policy(obs.unsqueeze(0), h)
        loss.backward()
    """
    assert rows(src, "TL301") == []


def test_tl301_argparse_underscore_and_other_defaults():
    src = (
        "import argparse\np = argparse.ArgumentParser()\np.add_argument('--train_batch_size', default=1)\n"
        "p.add_argument('--batch-size', default=32)\np.add_argument('--workers', default=1)\n"
    )
    assert rows(src, "TL301") == [3]


def test_tl302_tl303_need_device_in_play():
    src = "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
    assert rows(src, "TL302") == [] and rows(src, "TL303") == []


def test_tl302_tensor_dataset_through_name_exempt_but_tl303_not():
    src = HEAD + "x = torch.randn(10, 2)\nds = TensorDataset(x)\nloader = DataLoader(ds, batch_size=2)\n" + LOOP
    assert rows(src, "TL302") == []
    assert rows(src, "TL303") == [7]


def test_tl303_device_tensor_dataset_is_exempt():
    src = HEAD + "x = torch.randn(10, 2).to(device)\nds = TensorDataset(x)\nloader = DataLoader(ds)\n" + LOOP
    assert rows(src, "TL303") == []


def test_positional_num_workers_and_pin_memory():
    src = HEAD + "loader = DataLoader(ds, 8, True, None, None, 4, None, True)\n" + LOOP
    assert rows(src, "TL302") == [] and rows(src, "TL303") == []


def test_local_dataloader_class_is_not_torchs():
    src = "import torch\nx = torch.zeros(1).cuda()\nclass DataLoader:\n    pass\nl = DataLoader(ds)\n"
    assert rows(src, "TL302") == [] and rows(src, "TL303") == []


def test_both_loader_fixes_apply_across_passes():
    src = HEAD + "loader = DataLoader(\n    MNIST('d'),\n    batch_size=8,\n)\n" + LOOP
    out, remaining = fix_source(src, "e.py", unsafe=True)
    cst.parse_module(out)
    assert "import os\nimport torch\n" in out
    assert "num_workers=min(8, os.cpu_count() or 1)" in out and "pin_memory=torch.cuda.is_available()" in out
    assert not [f for f in remaining if f.code in ("TL302", "TL303")]
    assert fix_source(out, "e.py", unsafe=True)[0] == out


def test_tl302_reuses_existing_os_alias():
    src = "import os as _os\n" + HEAD + "loader = DataLoader(MNIST('d'), pin_memory=True)\n" + LOOP
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert "num_workers=min(8, _os.cpu_count() or 1)" in out
    assert out.count("import os") == 1


def test_tl302_keeps_future_import_first():
    src = "from __future__ import annotations\n" + HEAD + "loader = DataLoader(MNIST('d'), pin_memory=True)\n" + LOOP
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert out.startswith("from __future__ import annotations\nimport os\n")


def test_tl302_os_imported_only_in_another_function_gets_no_fix():
    src = (
        HEAD
        + "def f():\n    import os\n    return os.getcwd()\nloader = DataLoader(MNIST('d'), pin_memory=True)\n"
        + LOOP
    )
    found = [f for f in lint_source(src, "e.py") if f.code == "TL302"]
    assert found and found[0].fix is None


def test_gpu_resident_custom_dataset_is_exempt_from_both():
    src = (
        HEAD + "class D:\n    def __getitem__(self, i):\n        return torch.randn(3, device=device)\n"
        "loader = DataLoader(D(), batch_size=4)\n" + LOOP
    )
    assert rows(src, "TL302") == [] and rows(src, "TL303") == []
