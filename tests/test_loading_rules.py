"""TL301 batch-size-one, TL302 loader-no-workers, TL303 loader-no-pin-memory."""

import textwrap

import libcst as cst

from helpers import api, code, fix_source, lint_in_project, lint_source, notebook, process_bytes


def rows(src, code):
    return [f.row for f in lint_source(textwrap.dedent(src), "example.py") if f.code == code]


HEAD = (
    "import torch\nfrom torch.utils.data import DataLoader, TensorDataset\nfrom torchvision.datasets import MNIST\n"
    "device = torch.device('cuda')\n"
)
# The loader's batches go to the device (TL302/TL303 report only loaders that are used).
LOOP = "for x, y in loader:\n    out = model(x.to(device))\n"
# The same under a main guard: a script whose loader workers can be spawned (TL302 fixes it).
MAIN = "if __name__ == '__main__':\n    for x, y in loader:\n        out = model(x.to(device))\n"


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
    src = HEAD + "loader = DataLoader(\n    MNIST('d'),\n    batch_size=8,\n)\n" + MAIN
    out, remaining = fix_source(src, "e.py", unsafe=True)
    cst.parse_module(out)
    assert "import os\nimport torch\n" in out
    assert "num_workers=min(8, os.cpu_count() or 1)" in out and "pin_memory=torch.cuda.is_available()" in out
    assert not [f for f in remaining if f.code in ("TL302", "TL303")]
    assert fix_source(out, "e.py", unsafe=True)[0] == out


def test_tl302_reuses_existing_os_alias():
    src = "import os as _os\n" + HEAD + "loader = DataLoader(MNIST('d'), pin_memory=True)\n" + MAIN
    out, _ = fix_source(src, "e.py", unsafe=True)
    assert "num_workers=min(8, _os.cpu_count() or 1)" in out
    assert out.count("import os") == 1


def test_tl302_keeps_future_import_first():
    src = "from __future__ import annotations\n" + HEAD + "loader = DataLoader(MNIST('d'), pin_memory=True)\n" + MAIN
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


def test_dataset_built_with_a_device_is_exempt_from_both():
    """`Dataset(..., device=device)` makes its items on the GPU: workers cannot use
    CUDA, and pinning a CUDA tensor raises."""
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\nfrom mydata import Images\n"
        "def main():\n    device = torch.device('cuda')\n    ds = Images(paths, device=device)\n"
        "    loader = DataLoader(ds, batch_size=4)\n    for x, y in loader:\n        out = model(x.to(device))\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert rows(src, "TL302") == [] and rows(src, "TL303") == []
    cpu = src.replace("device=device)", "device='cpu')")
    assert rows(cpu, "TL302") == [7] and rows(cpu, "TL303") == [7]


def _tl302_fix(src, path="e.py"):
    found = [f for f in lint_source(src, path) if f.code == "TL302"]
    assert found, "TL302 not reported"
    return found[0].fix


def test_tl302_no_fix_when_a_function_run_on_import_iterates_the_loader():
    """`main()` called at module level without a main guard: a spawned worker
    imports the script again and reruns it."""
    body = "def main():\n    loader = DataLoader(MNIST('d'), pin_memory=True)\n" + textwrap.indent(LOOP, "    ")
    assert _tl302_fix(HEAD + body + "main()\n") is None
    assert _tl302_fix(HEAD + body + "if __name__ == '__main__':\n    main()\n") is not None


def test_tl302_library_function_building_a_loader_gets_the_fix():
    src = HEAD + "def make_loader():\n    return DataLoader(MNIST('d'), pin_memory=True)\nx = torch.zeros(1).cuda()\n"
    assert _tl302_fix(src) is not None


def test_tl302_notebook_dataset_defined_in_the_notebook_gets_no_fix():
    """A spawned worker (Jupyter on Windows/macOS) cannot unpickle a class defined
    in the notebook; a torchvision dataset is fine."""
    cls = (
        "class Squares(torch.utils.data.Dataset):\n    def __len__(self):\n        return 8\n"
        "    def __getitem__(self, i):\n        return torch.load(f'{i}.pt')\n"
    )

    def nb(ds):
        return notebook(
            code(HEAD + cls),
            code(f"loader = DataLoader({ds}, batch_size=4, pin_memory=True)\n" + LOOP),
        )

    for ds, fixed in (("Squares()", False), ("MNIST('d')", True)):
        out = process_bytes(nb(ds), "nb.ipynb")
        found = [f for f in out.findings if f.code == "TL302"]
        assert found and (found[0].fix is not None) is fixed, ds


# -- a loader only peeked at feeds no pass (round 8: R8-026, R8-029, R8-036; wild2) ----------------

IMAGES = "from torchvision.datasets import ImageFolder\nds = ImageFolder('d')\n"
TRAIN_STEP = (
    "def train_step(model, dataloader):\n    for x, y in dataloader:\n        model(x.to(device)).sum().backward()\n"
)


def test_a_loader_built_inside_next_iter_is_only_peeked():
    src = (
        HEAD
        + IMAGES
        + "def visualize():\n    img, y = next(iter(DataLoader(ds, batch_size=1)))\n    show(model(img))\n"
    )
    assert rows(src, "TL301") == [] and rows(src, "TL302") == []
    # the same loader iterated by a loop is a pass
    looped = (
        HEAD + IMAGES + "def run():\n    for img, y in DataLoader(ds, batch_size=1):\n        model(img.to(device))\n"
    )
    assert rows(looped, "TL302") == [8]


def test_an_iterator_drawn_from_once_is_a_peek_but_not_in_a_loop():
    once = (
        HEAD
        + IMAGES
        + "loader = DataLoader(ds, batch_size=16)\nit = iter(loader)\nx, y = next(it)\nshow(model(x.to(device)))\n"
    )
    assert rows(once, "TL302") == [] and rows(once, "TL303") == []
    stepped = (
        HEAD + IMAGES + "loader = DataLoader(ds, batch_size=1)\nit = iter(loader)\nfor step in range(1000):\n"
        "    x, y = next(it)\n    model(x.to(device)).sum().backward()\n"
    )
    assert rows(stepped, "TL301") == [7] and rows(stepped, "TL302") == [7]


def test_a_parameter_of_the_same_name_is_not_the_global_loader():
    # `train(dataloader)` receives what its callers pass; the global `dataloader` is only peeked
    src = (
        HEAD + IMAGES + TRAIN_STEP + "dataloader = DataLoader(ds, batch_size=1)\nimg, y = next(iter(dataloader))\n"
        "simple = DataLoader(ds, batch_size=32)\ntrain_step(model, simple)\n"
    )
    assert rows(src, "TL301") == [] and rows(src, "TL302") == [12]
    passed = HEAD + IMAGES + TRAIN_STEP + "dataloader = DataLoader(ds, batch_size=1)\ntrain_step(model, dataloader)\n"
    assert rows(passed, "TL301") == [10] and rows(passed, "TL302") == [10]


def test_a_loader_rebound_before_training_is_not_the_one_trained_on():
    src = (
        HEAD + IMAGES + TRAIN_STEP + "train_dl = DataLoader(ds, batch_size=1, num_workers=1)\n"
        "train_dl, test_dl = make_loaders(batch_size=32)\ntrain_step(model, train_dl)\n"
    )
    assert rows(src, "TL301") == [] and rows(src, "TL304") == []
    # a wrapper that takes the loader and returns it (opacus' make_private) hands it on
    wrapped = (
        HEAD
        + IMAGES
        + TRAIN_STEP
        + "train_dl = DataLoader(ds)\nmodel, train_dl = wrap(model, train_dl)\ntrain_step(model, train_dl)\n"
    )
    assert rows(wrapped, "TL302") == [10]


def test_a_loader_only_shown_or_measured_is_unused():
    cells = [
        code(
            HEAD
            + IMAGES
            + "train_dl = DataLoader(ds, batch_size=1)\ntest_dl = DataLoader(ds, batch_size=1)\ntrain_dl, test_dl"
        ),
        code("len(train_dl), len(test_dl)"),
        code("img, label = next(iter(train_dl))"),
    ]
    found = lint_source(notebook(*cells).decode(), "nb.ipynb")
    assert [f for f in found if f.code in ("TL301", "TL302", "TL303")] == []
    used = cells + [code("for x, y in test_dl:\n    model(x.to(device))")]
    found = lint_source(notebook(*used).decode(), "nb.ipynb")
    assert sorted({(f.code, f.row) for f in found if f.code in ("TL301", "TL302")}) == [("TL301", 8), ("TL302", 8)]


# -- a Dataset class of another project file: what its items cost (R8-031, R8-032; miss R8 train.py:25) --

_INDEXING = (
    "import numpy as np\nimport torch\nfrom torch.utils.data import Dataset\nclass Reviews(Dataset):\n"
    "    def __init__(self, data):\n        self.data = data\n    def __len__(self):\n        return len(self.data[0])\n"
    "    def __getitem__(self, i):\n        return self.data[0][i], torch.from_numpy(np.asarray(self.data[1][i]))\n"
)
_READING = (
    "from PIL import Image\nfrom torch.utils.data import Dataset\nclass Photos(Dataset):\n"
    "    def __init__(self, mode='train'):\n        self.paths = list_images(mode)\n"
    "    def __getitem__(self, i):\n        return self.load(self.paths[i])\n"
    "    def load(self, path):\n        return to_tensor(Image.open(path))\n"
)
_SCRIPT = (
    "import torch\nfrom torch.utils.data import DataLoader\nfrom {module} import {cls}\ndevice = torch.device('cuda')\n"
    "data = [reviews, labels]\ndata = {cls}(data=data)\nloader = DataLoader(data, batch_size=16)\n"
    "for x, y in loader:\n    model(x.to(device)).sum().backward()\n"
)


def _project_rows(tmp_path, module_src, module, cls, code_):
    (tmp_path / f"{module}.py").write_text(module_src)
    script = _SCRIPT.format(module=module, cls=cls)
    (tmp_path / "train.py").write_text(script)
    index = api.project_index([str(tmp_path)])
    return [f.row for f in lint_source(script, str(tmp_path / "train.py"), project=index) if f.code == code_]


def test_a_project_dataset_that_only_indexes_memory_needs_no_workers(tmp_path):
    assert _project_rows(tmp_path, _INDEXING, "reviews", "Reviews", "TL302") == []
    # a transform per item is work for workers
    transformed = _INDEXING.replace("return self.data[0][i]", "return self.transform(self.data[0][i])")
    assert _project_rows(tmp_path, transformed, "reviews2", "Reviews", "TL302") == [7]


def test_a_project_dataset_that_reads_a_file_per_item_needs_workers(tmp_path):
    (tmp_path / "photos.py").write_text(_READING)
    script = _SCRIPT.format(module="photos", cls="Photos").replace("Photos(data=data)", "Photos()")
    (tmp_path / "train.py").write_text(script)
    index = api.project_index([str(tmp_path)])
    assert [f.row for f in lint_source(script, str(tmp_path / "train.py"), project=index) if f.code == "TL302"] == [7]
    # read alone, nothing says what `Photos()` does per item: it may only index memory
    assert [f.row for f in lint_source(script, "train.py") if f.code == "TL302"] == []


def test_a_dataset_tokenized_ahead_and_indexed_per_item_needs_no_workers(tmp_path):
    # R7-029: a project class that tokenizes in `__init__` and indexes the encodings per item
    encoded = (
        "import torch\nfrom torch.utils.data import Dataset\nclass Texts(Dataset):\n"
        "    def __init__(self, texts, tokenizer):\n        self.encodings = tokenizer(texts, padding=True)\n"
        "    def __getitem__(self, i):\n        return {k: torch.tensor(v[i]) for k, v in self.encodings.items()}\n"
    )
    assert _project_rows(tmp_path, encoded, "texts", "Texts", "TL302") == []
    tokenized_per_item = encoded.replace("torch.tensor(v[i])", "self.tokenizer(v[i])")
    assert _project_rows(tmp_path, tokenized_per_item, "texts2", "Texts", "TL302") == [7]


_SHARDS = (
    "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n"
    "device = torch.device('cuda')\nclass Shards(Dataset):\n"
    "    def __init__(self, root, split):\n        self.x, self.y, self.cum = load_shards(root, split)\n"
    "    def __getitem__(self, i):\n        b = int(np.searchsorted(self.cum[1:], i, side='right'))\n"
    "        return self.x[b][i - self.cum[b]], self.y[b][i - self.cum[b]]\n"
    "def make_loader(dataset, shuffle):\n    return DataLoader(dataset, batch_size=64, shuffle=shuffle)\n"
    "train = make_loader(Shards('d', 'train'), True)\nval = make_loader({val}, False)\n"
    "for x, y in train:\n    model(x.to(device)).sum().backward()\n"
)


def test_a_loader_builder_over_in_memory_datasets_from_every_caller():
    # R7-026: every caller hands the builder an in-memory dataset
    assert rows(_SHARDS.format(val="Shards('d', 'val')"), "TL302") == []
    # one caller hands it a dataset that reads files: can't tell which the loader holds
    mixed = _SHARDS.format(val="ImageFolder('val')").replace(
        "import numpy as np\n", "import numpy as np\nfrom torchvision.datasets import ImageFolder\n"
    )
    assert rows(mixed, "TL302") == [13]


_TOKENIZING = (
    "import torch\nfrom torch.utils.data import DataLoader, Dataset\ndevice = torch.device('cuda')\n"
    "class Sentences(Dataset):\n    def __init__(self, rows, tokenizer):\n        self.rows = rows\n"
    "        self.tokenizer = tokenizer\n    def __len__(self):\n        return len(self.rows)\n"
    "    def __getitem__(self, i):\n        return self.rows[i]\n    def pad_data(self, rows):\n"
    "        return {body}\n    def collate_fn(self, rows):\n        return self.pad_data(rows)\n"
    "ds = Sentences(rows, tokenizer)\nloader = DataLoader(ds, batch_size=16, collate_fn=ds.collate_fn)\n"
    "for batch in loader:\n    model(batch['ids'].to(device)).sum().backward()\n"
)


def test_a_dataset_method_as_collate_fn_that_tokenizes_is_work_for_workers():
    # round-8 misses cyingliu classifier.py:252-325: `collate_fn=ds.collate_fn` tokenizes every batch
    assert rows(_TOKENIZING.format(body="self.tokenizer(rows, padding=True)"), "TL302") == [17]
    # a collate method that only stacks: the in-memory dataset leaves workers nothing to do
    assert rows(_TOKENIZING.format(body="{'ids': torch.stack(rows)}"), "TL302") == []


_FACTORY = (
    "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision.datasets import ImageFolder\n"
    "device = torch.device('cuda')\ndef get_test_loader():\n    loader = DataLoader(ImageFolder('test'))\n"
    "    return loader\ndef predict(loader):\n    for x, y in loader:\n        model(x.to(device))\n"
    "if __name__ == '__main__':\n    {call}\n"
)


def test_a_loader_factory_nothing_calls_builds_no_loader(tmp_path):
    # R7-020, R7-031: the factory's one call is commented out
    def tl302(src, name):
        (tmp_path / name).write_text(src)
        index = api.project_index([str(tmp_path)])
        return [f.row for f in lint_source(src, str(tmp_path / name), project=index) if f.code == "TL302"]

    assert tl302(_FACTORY.format(call="# predict(get_test_loader())\n    pass"), "blend.py") == []
    assert tl302(_FACTORY.format(call="predict(get_test_loader())"), "blend2.py") == [6]
    # another project file imports the factory: it may be called there
    (tmp_path / "run.py").write_text("from blend3 import get_test_loader\npredict(get_test_loader())\n")
    assert tl302(_FACTORY.format(call="pass"), "blend3.py") == [6]


def test_a_loader_over_a_tensor_indexes_memory():
    # wild2 multi_gpu_quiver.py:75 shape: a loader over an index tensor, the sampling done elsewhere
    src = HEAD + "idx = torch.randperm(50000)[:40000]\nloader = DataLoader(idx, batch_size=1024, shuffle=True)\n" + LOOP
    assert rows(src, "TL302") == []
    on_gpu = HEAD + "idx = torch.arange(50000, device=device)\nloader = DataLoader(idx, batch_size=1024)\n" + LOOP
    assert rows(on_gpu, "TL302") == [] and rows(on_gpu, "TL303") == []
    # a loader over a dataset of images still loads per item
    files = HEAD + "from torchvision.datasets import ImageFolder\nloader = DataLoader(ImageFolder('d'))\n" + LOOP
    assert rows(files, "TL302") == [6]


def test_a_builder_loader_whose_batches_go_nowhere_feeds_no_pass():
    # wild dataloader-intuition.ipynb cell 11: batches printed and walked with `pass`, no model
    head = "import torch\nfrom mylib import make_loader, train_step\nloader = make_loader(ds, batch_size=1)\n"
    idle = head + "it = iter(loader)\nprint(next(it))\nfor batch in loader:\n    pass\nprint(batch)\n"
    assert rows(idle, "TL301") == []
    # a loop that hands its batches to code we cannot see may train on them
    handed = head + "for batch in loader:\n    train_step(model, batch)\n"
    assert rows(handed, "TL301") == [3]


_COLLATE_FACTORY = (
    "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader\n"
    "device = torch.device('cuda')\n"
    "def get_collate_fn(pad_index):\n"
    "    def collate_fn(batch):\n"
    "        ids = [example['ids'] for example in batch]\n"
    "        return {'ids': nn.utils.rnn.pad_sequence(ids, padding_value=pad_index)}\n"
    "    return collate_fn\n"
    "def get_data_loader(dataset, batch_size, pad_index, shuffle=False):\n"
    "    collate_fn = get_collate_fn(pad_index)\n"
    "    return DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn, shuffle=shuffle, num_workers=4)\n"
    "loader = get_data_loader(train_data, 128, 0, shuffle=True)\n"
    "for epoch in range(10):\n"
    "    for batch in loader:\n"
    "        loss = model(batch['ids'].to(device)).sum()\n"
    "        loss.backward()\n"
)


def test_tl303_reads_the_collate_a_same_file_factory_returns():
    # released wild pytorch-seq2seq notebook 1, cell 74: `collate_fn = get_collate_fn(pad_index)`
    # returns a nested def that pads on the host: the batches are host tensors, worth pinning
    assert rows(_COLLATE_FACTORY, "TL303") == [12]
    # the returned collate moves each batch to the device: pinning would raise
    placing = _COLLATE_FACTORY.replace(
        "return {'ids': nn.utils.rnn.pad_sequence(ids, padding_value=pad_index)}",
        "return {'ids': nn.utils.rnn.pad_sequence(ids, padding_value=pad_index).to(device)}",
    )
    assert rows(placing, "TL303") == []
    # a factory returning something we cannot read (an imported collate) stays unknown
    unread = _COLLATE_FACTORY.replace(
        "    return collate_fn\n", "    return other.collate if pad_index else collate_fn\n"
    )
    assert rows(unread, "TL303") == []


def test_tl302_offers_no_workers_fix_for_a_nested_collate():
    # a nested function cannot be pickled for spawned workers: reported, no fix
    src = _COLLATE_FACTORY.replace(", num_workers=4", "")
    found = [f for f in lint_source(src, "example.py") if f.code == "TL302"]
    assert [f.row for f in found] == [12]
    assert all(f.fix is None for f in found)


_ESTIMATOR = (
    "import argparse\nimport math\n{extra}"
    "def main():\n"
    "    p = argparse.ArgumentParser()\n"
    "    p.add_argument('--batch_size', default=1, type=int)\n"
    "    args = p.parse_args()\n"
    "    print(args.batch_size * 2 * math.prod((1024, 4096)))\n"
    "main()\n"
)


def test_tl301_silent_on_a_calculator_that_runs_no_model(tmp_path):
    # released wild LLMs-from-scratch ch04 memory_estimator_gqa.py:40, plot_memory_estimates_swa.py:111:
    # a KV-cache memory estimator (standard library, numpy, matplotlib) whose --batch_size is arithmetic
    def tl301(files, target="estimate.py"):
        files = {"train.py": "import torch\nmodel = torch.nn.Linear(4, 2)\n", **files}  # a project of several files
        return [f.row for f in lint_in_project(tmp_path, files, target) if f.code == "TL301"]

    assert tl301({"estimate.py": _ESTIMATOR.format(extra="")}) == []
    assert (
        tl301({"estimate.py": _ESTIMATOR.format(extra="import numpy as np\nimport matplotlib.pyplot as plt\n")}) == []
    )
    # the same parser in a script that imports torch: its batches run on the GPU
    assert tl301({"estimate.py": _ESTIMATOR.format(extra="import torch\n")}) == [6]
    # a stdlib-only config module whose parser the training script imports (st-gcn's stgcn/config.py)
    config = _ESTIMATOR.format(extra="").replace("def main():", "def get_args():").replace("main()\n", "")
    train = "import torch\nfrom config import get_args\nargs = get_args()\n"
    assert tl301({"config.py": config, "train.py": train}, "config.py") == [5]
    # linted alone, nothing says who imports it: reported
    assert rows(_ESTIMATOR.format(extra=""), "TL301") == [5]
