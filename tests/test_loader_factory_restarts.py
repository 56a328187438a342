"""TL304 through a loader factory of another file: `get_dataloaders` builds the
loaders with worker processes and returns them in a tuple; the training
script unpacks them and walks the train loader in every epoch (the round-9
shape of NoeFlandre `models/lenet/src/dataset.py:90`, iterated at
`models/lenet/scripts/train.py:170`). The loader's workers start again at
every epoch: reported at the `DataLoader(...)` in the factory's file."""

import ast

from torchlint import api
from torchlint.analysis.project.result_passes import result_passes
from torchlint.analysis.project.summary import summarize

from helpers import fix_source, lint_source

FACTORY = (
    "from torch.utils.data import DataLoader\n"
    "def get_dataloaders(data_dir, batch_size=32):\n"
    "    train_loader = DataLoader(Images(data_dir, train=True), batch_size=batch_size, shuffle=True, num_workers=2)\n"
    "    val_loader = DataLoader(Images(data_dir, train=False), batch_size=batch_size, num_workers=2)\n"
    "    return train_loader, val_loader\n"
)
TRAIN = (
    "import torch\n"
    "def train(epochs):\n"
    "    device = torch.device('cuda')\n"
    "    from data.loaders import get_dataloaders\n"
    "    train_loader, val_loader = get_dataloaders('data', batch_size=64)\n"
    "    model = Net().to(device)\n"
    "    for epoch in range(epochs):\n"
    "        for images, labels in train_loader:\n"
    "            loss = model(images.to(device)).sum()\n"
    "            loss.backward()\n"
    "{validate}"
)
NOW_AND_THEN = (
    "        if epoch % 10 == 0:\n"
    "            for images, labels in val_loader:\n"
    "                model(images.to(device))\n"
)


def restarts(tmp_path, train: str, factory: str = FACTORY):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data" / "__init__.py").write_text("")
    (tmp_path / "data" / "loaders.py").write_text(factory)
    (tmp_path / "train.py").write_text(train)
    (tmp_path / "setup.cfg").write_text("")
    index = api.project_index([str(tmp_path)])
    found = lint_source(factory, str(tmp_path / "data" / "loaders.py"), project=index)
    return [(f.row, f.message) for f in found if f.code == "TL304"]


def test_the_train_loader_a_script_walks_every_epoch_is_reported_in_the_factory(tmp_path):
    found = restarts(tmp_path, TRAIN.format(validate=NOW_AND_THEN))
    assert [row for row, _ in found] == [3]  # the val loader, walked every tenth epoch, is not
    assert "callers of `get_dataloaders` iterate the loader it returns" in found[0][1]


def test_no_fix_is_offered_from_the_factorys_file(tmp_path):
    # the passes are in train.py: whether it seeds its generators, or changes the
    # dataset between epochs, cannot be seen from data/loaders.py
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__init__.py").write_text("")
    (tmp_path / "data" / "loaders.py").write_text(FACTORY)
    (tmp_path / "train.py").write_text(TRAIN.format(validate=""))
    (tmp_path / "setup.cfg").write_text("")
    index = api.project_index([str(tmp_path)])
    path = str(tmp_path / "data" / "loaders.py")
    found = [f for f in lint_source(FACTORY, path, project=index) if f.code == "TL304"]
    assert [f.row for f in found] == [3] and all(not f.fixable for f in found)
    fixed, _ = fix_source(FACTORY, path, unsafe=True, project=index)
    assert "persistent_workers" not in fixed


def test_silent_where_no_caller_walks_the_loader_again_and_again(tmp_path):
    once = (
        "import torch\nfrom data.loaders import get_dataloaders\n"
        "train_loader, val_loader = get_dataloaders('data')\nmodel = Net().cuda()\n"
        "for images, labels in train_loader:\n    model(images.cuda()).sum().backward()\n"
    )
    peek = TRAIN.format(validate="").replace("loss.backward()\n", "loss.backward()\n            break\n")
    rebound = TRAIN.format(validate="").replace(
        "    for epoch in range(epochs):\n",
        "    for epoch in range(epochs):\n        train_loader = make_loader()\n",
    )
    for train in (once, peek, rebound):
        assert restarts(tmp_path, train) == [], train


def test_silent_without_workers_or_with_persistent_ones(tmp_path):
    train = TRAIN.format(validate="")
    no_workers = FACTORY.replace(", num_workers=2)", ")")
    persistent = FACTORY.replace("num_workers=2)", "num_workers=2, persistent_workers=True)")
    for factory in (no_workers, persistent):
        assert restarts(tmp_path, train, factory) == [], factory


def test_silent_where_the_callers_never_use_an_accelerator(tmp_path):
    cpu = TRAIN.format(validate="").replace("    device = torch.device('cuda')\n", "").replace(".to(device)", "")
    assert "device" not in cpu
    assert restarts(tmp_path, cpu) == []


def test_the_summary_records_which_element_of_which_call_is_walked_again():
    summary = summarize(TRAIN.format(validate=NOW_AND_THEN))
    assert summary.result_passes == (("get_dataloaders", 0),)
    whole = "import utils\nloader = utils.load_dataset('d', 8)\nwhile True:\n    for x in enumerate(loader):\n        step(x)\n"
    assert summarize(whole).result_passes == (("utils.load_dataset", -1),)
    # a loader bound again in the scope, or a local value's method, is not the call's result
    twice = whole + "loader = other()\n"
    assert summarize(twice).result_passes == ()
    local = (
        "def f(ds):\n    loader = ds.loader()\n    for e in range(3):\n        for x in loader:\n            step(x)\n"
    )
    assert result_passes(ast.parse(local), lambda name: None) == ()
