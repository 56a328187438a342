"""Code that runs once or never: smoke tests written as functions, loops that look at
the first few batches or walk one element, functions nothing calls (rounds 9, 10 and 12
of docs/accuracy/rounds/, round 2 and peft of round 3: each a fact of the analysis, with
the near miss that must still be reported)."""

from helpers import lint_in_project, lint_source


def rule(src: str, code_: str, path: str = "model.py"):
    """Rows of `code_` in `src` linted alone."""
    return [f.row for f in lint_source(src, path) if f.code == code_]


def rows(tmp_path, files, code_: str, target: str = "model.py"):
    """Rows of `code_` in `target` linted with the project of `files`."""
    return [f.row for f in lint_in_project(tmp_path, files, target) if f.code == code_]


# -- a model module's `main()` that only its `__main__` block calls (R10-001) ----------------

_MODEL = (
    "import torch\nimport torch.nn as nn\n"
    "class UNet(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.conv = nn.Conv2d(3, 1, 3)\n    def forward(self, x):\n        return self.conv(x)\n"
    "# Test code\ndef main():\n    device = 'cuda:0' if torch.cuda.is_available() else 'cpu'\n"
    "    x = torch.rand(1, 3, 32, 32).to(device)\n    model = UNet().to(device)\n"
    "    print(model(x).shape)\n"
    "if __name__ == '__main__':\n    main()\n"
)


_USES_THE_MODEL = "from model import UNet\nnet = UNet()\n"


def test_a_function_only_the_smoke_block_of_a_model_module_calls_is_the_smoke_test(tmp_path):
    # hebbian-skin-cancer-segmentation models/HUNet.py:239: one forward of a random input;
    # the project's other files import the model, not `main`
    assert rows(tmp_path, {"model.py": _MODEL, "run.py": _USES_THE_MODEL}, "TL104") == []
    # the file alone: another file may import `main` and call it in a loop
    assert rule(_MODEL, "TL104") == [12]


def test_the_same_lines_in_the_main_block_itself_are_a_smoke_test_too():
    inline = _MODEL.replace("if __name__ == '__main__':\n    main()\n", "").replace(
        "# Test code\ndef main():\n", "if __name__ == '__main__':\n"
    )
    assert rule(inline, "TL104") == []


def _lint_in_project(tmp_path, src: str):
    return rows(tmp_path, {"model.py": src, "run.py": _USES_THE_MODEL}, "TL104")


def test_a_main_that_is_also_called_elsewhere_in_the_file_or_trains_is_not_a_smoke_test(tmp_path):
    twice = _MODEL + "def again():\n    main()\n"
    assert _lint_in_project(tmp_path, twice) == [12]
    trains = _MODEL.replace(
        "    print(model(x).shape)\n",
        "    for step in range(100):\n        y = torch.rand(1, 3, 32, 32).to(device)\n"
        "        model(y).sum().backward()\n",
    )
    assert 15 in _lint_in_project(tmp_path, trains)
    # a library trainer's run (`trainer.train()`) is real work as well
    hf = (
        "import torch\nfrom transformers import Trainer\nclass Collator:\n    pass\n"
        "def main():\n    batch_size = 1\n    trainer = Trainer(model=model, args=args)\n"
        "    ids = torch.zeros(8).to('cuda')\n    trainer.train()\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert _lint_in_project(tmp_path, hf) == [8]


def test_a_main_another_project_file_imports_is_not_a_smoke_test(tmp_path):
    for other in ("from model import main\nfor i in range(10):\n    main()\n", "import model\nmodel.main()\n"):
        assert rows(tmp_path, {"model.py": _MODEL, "run.py": other}, "TL104") == [12]


# -- a loop that looks at the first few batches (R10-006) --------------------------------------

_PEEK = (
    "import torch\nfrom torch.utils.data import DataLoader\n"
    "device = torch.device('cuda')\nmodel = Net().to(device)\n"
    "loader = DataLoader(ImageFolder('data'), batch_size=8)\n"
    "for counter, (x, y) in enumerate(loader):\n    if counter == 5:\n        break\n"
    "    print(model(x.to(device)).sum().item())\n"
)


def test_a_loop_that_stops_after_a_few_batches_is_no_per_step_work():
    # segmentation_dataset.py:217: `if counter == 5: break` draws five batches to look at
    assert rule(_PEEK, "TL302", "show.py") == []
    assert rule(_PEEK, "TL401", "show.py") == []


def test_a_loop_bounded_by_a_larger_count_or_a_variable_is_still_per_step_work():
    assert rule(_PEEK.replace("counter == 5", "counter == 500"), "TL302", "show.py") == [5]
    assert rule(_PEEK.replace("counter == 5", "counter == max_steps"), "TL302", "show.py") == [5]


# -- functions nothing runs, together; classes nobody imports stay reachable (round 11, round 2) --

_HELPERS = (
    "import torch\n"
    "def evaluate(model, loader, again):\n    for x, y in loader:\n"
    "        torch.cuda.empty_cache()\n        print(model(x.cuda()).sum().item())\n"
    "    if again:\n        report(model, loader)\n"
    "def report(model, loader):\n    for x, y in loader:\n"
    "        torch.cuda.empty_cache()\n        print(model(x.cuda()).mean().item())\n"
    "    evaluate(model, loader, False)\n"
)


def _syncs_and_cache_calls(tmp_path, files) -> list:
    """(code, row) of the TL401 and TL403 findings of `bleu.py` in the project of `files`."""
    found = lint_in_project(tmp_path, files, "bleu.py")
    return sorted((f.code, f.row) for f in found if f.code in ("TL401", "TL403"))


def test_functions_that_only_call_each_other_and_that_nothing_else_calls_never_run(tmp_path):
    # neural-network-and-deeplearning bleu.py: `compute_average_bleu_over_dataset` is called
    # by nobody; here two such functions call each other, so neither is reached
    other = "import torch\nprint(torch.__version__)\n"
    assert _syncs_and_cache_calls(tmp_path, {"bleu.py": _HELPERS, "train.py": other}) == []


def test_the_same_functions_called_by_another_file_run(tmp_path):
    other = "from bleu import evaluate\nevaluate(model, loader)\n"
    assert _syncs_and_cache_calls(tmp_path, {"bleu.py": _HELPERS, "train.py": other}) != []


def test_a_model_class_no_file_imports_is_still_reported(tmp_path):
    # Text-Classification-Pytorch models/selfAttention.py:89: `main.py` imports another model,
    # but the class is the one a user swaps in by editing the import: its forward's cost counts
    model = (
        "import torch\nimport torch.nn as nn\nclass SelfAttention(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lstm = nn.LSTM(8, 8)\n"
        "    def forward(self, x):\n        h_0 = torch.zeros(1, x.size(1), 8).cuda()\n"
        "        return self.lstm(x, (h_0, h_0))\n"
    )
    files = {"self_attention.py": model, "main.py": "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"}
    assert rows(tmp_path, files, "TL104", "self_attention.py") == [8]


def test_a_main_that_trains_through_the_files_own_subclass_of_a_library_trainer_is_real_work(tmp_path):
    # peft examples/cartridge_self_study/train_distill.py:140: `class DistillationTrainer(Trainer)`
    # overrides `compute_loss`, and `main()` runs `trainer.train()` from the `__main__` block
    src = (
        "import argparse\nimport torch\nfrom transformers import Trainer\n"
        "class DistillationTrainer(Trainer):\n    def compute_loss(self, model, inputs):\n"
        "        return model(**inputs).loss\n"
        "def main():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--per_device_train_batch_size', type=int, default=1)\n"
        "    args = parser.parse_args()\n"
        "    trainer = DistillationTrainer(model=torch.nn.Linear(2, 2).to('cuda'), args=args)\n"
        "    trainer.train()\n"
        "if __name__ == '__main__':\n    main()\n"
    )
    assert rows(tmp_path, {"train.py": src, "data.py": "import json\n"}, "TL301", "train.py") == [9]


_BLEU = (
    "import torch\n"
    "def compute_average_bleu_over_dataset(model, dataloader, device):\n"
    "    for images, captions in dataloader:\n        torch.cuda.empty_cache()\n"
    "        print(model(images.to(device)).sum().item())\n"
)


def _bleu_project(tmp_path, other: str):
    train = "import torch\nimport bleu\nmodel = torch.nn.Linear(2, 2).cuda()\n"
    found = _syncs_and_cache_calls(tmp_path, {"bleu.py": _BLEU, "train.py": train, "eval.py": other})
    return [code for code, _ in found]


def test_a_librarys_module_of_the_same_name_does_not_reach_the_projects(tmp_path):
    # neural-network-and-deeplearning bleu.py:14, :21: nothing calls the function; another
    # file's `from pycocoevalcap.bleu.bleu import Bleu` is the library's own `bleu` module
    assert _bleu_project(tmp_path, "from pycocoevalcap.bleu.bleu import Bleu\n") == []


def test_the_project_perhaps_installed_under_another_name_may_reach_it(tmp_path):
    # `from captioning.bleu import compute_average_bleu_over_dataset`: the project's own
    # `bleu.py`, installed as a package named `captioning`
    other = "from captioning.bleu import compute_average_bleu_over_dataset\n"
    assert _bleu_project(tmp_path, other) == ["TL401", "TL403"]


# -- a loop over a display of one element (R12-017) ---------------------------------------------

_PASSES = (
    "import torch\ndevice = torch.device('cuda')\nmodel = Net().to(device)\n"
    "def rollouts(model, batch):\n    torch.cuda.empty_cache()\n    return model(batch.to(device))\n"
    "def eval_model(batch):\n    pass_at = [\n        1,\n    ]  # 3, 5, 10]\n"
    "    for npass in pass_at:\n        rollouts(model, batch)\n"
    "for epoch in range(10):\n    eval_model(batch)\n"
)


def test_a_loop_over_a_one_element_list_runs_once():
    # mini-grpo cli.py:356: `pass_at = [1]` (the other values commented out), then
    # `for npass in pass_at:` calls a helper that empties the cache once per evaluation
    assert rule(_PASSES, "TL403", "cli.py") == []
    assert rule(_PASSES.replace("for npass in pass_at:", "for npass in [1]:"), "TL403", "cli.py") == []


def test_a_loop_over_a_longer_list_or_one_that_grows_runs_again_and_again():
    longer = _PASSES.replace("        1,\n", "        1, 3, 5,\n")
    assert rule(longer, "TL403", "cli.py") == [12]
    grows = _PASSES.replace("    for npass", "    pass_at.append(5)\n    for npass")
    assert rule(grows, "TL403", "cli.py") == [13]
