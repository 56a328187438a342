"""Causes judged in rounds 7-11 that stayed open (docs/accuracy/rounds/round-*/causes.tsv),
each as a fact of the analysis: a small program in the shape of the real rows, and the
near miss that must still be reported."""

import libcst as cst

from torchlint.analysis import Analysis

from helpers import api, lint_source

GPU = "import torch\nimport torch.nn as nn\ndevice = torch.device('cuda')\n"


def rule(src: str, code_: str, path: str = "train.py", project=None):
    return [f.row for f in lint_source(src, path, project=project) if f.code == code_]


# -- a CPU input of a moved model: the crash comes first (R11-013..016) -------------------------

_SR_SCRIPT = (
    "import torch\nfrom torchvision.transforms import ToTensor\nfrom model import ESPCN\n"
    "if __name__ == '__main__':\n    device = torch.device('cuda' if args.cuda else 'cpu')\n"
    "    model = ESPCN().to(device)\n    model.load_state_dict(torch.load(args.model))\n"
    "    for i, f in enumerate(image_filenames):\n        y = load(f)\n"
    "        y = ToTensor()(y).view(1, -1, y.size[1], y.size[0])\n"
    "        out = model(y)[0].detach().numpy()\n"
)


def test_a_to_tensor_transform_makes_a_cpu_tensor_the_moved_model_cannot_take():
    # vkhoi inference_save_to_mat.py: `ToTensor()(img)` reaches a model on the GPU unmoved
    assert rule(_SR_SCRIPT, "TL102") == [10]
    # and the no-grad advice is moot: the forward raises before any graph is kept
    assert rule(_SR_SCRIPT, "TL201") == []
    # the near miss: the input is moved, so the forward runs on the GPU with autograd on
    moved = _SR_SCRIPT.replace("y = ToTensor()(y).view(", "y = ToTensor()(y).to(device).view(")
    assert rule(moved, "TL102") == []
    assert rule(moved, "TL201") == [11]


def test_a_cpu_lengths_argument_does_not_make_the_forward_crash():
    # pytorch-sentiment-analysis: `model(ids.to(device), lengths)`: lengths stay on the host
    src = (
        "import torch\ndef predict(text, model, device):\n    ids = encode(text)\n"
        "    length = torch.LongTensor([len(ids)])\n    tensor = torch.LongTensor(ids).unsqueeze(0).to(device)\n"
        "    return model(tensor, length).argmax(-1).item()\n"
        "model = torch.load('m.pt').to(torch.device('cuda'))\nmodel.eval()\n"
        "for text in texts:\n    print(predict(text, model, torch.device('cuda')))\n"
    )
    assert rule(src, "TL201") == [6]


# -- a function only reached from guarded callers, through a method (R7-001..004) ---------------

_SAMPLER = (
    "import torch\nclass DDPM:\n    def __init__(self, model):\n        self.model = model\n"
    "    def predict(self, t, x):\n        return self.model(x, t)\n"
    "    def backward_sample(self, t, x):\n        return self.predict(t, x) * 0.5\n"
)
_ENGINE = (
    "import torch\nfrom sampler import DDPM\ndef infer(sampler, x, steps):\n    sampler.model.eval()\n"
    "    for t in steps:\n        with torch.inference_mode():\n            x = sampler.backward_sample(t, x)\n"
    "    return x\n"
)
_TOY = (
    "import torch\nclass Toy:\n    def backward_sample(self, t, x):\n        return x - t\n"
    "x = torch.zeros(3)\nfor t in range(10):\n    x = Toy().backward_sample(t, x)\n"
)


def test_calls_in_a_file_of_its_own_method_of_that_name_do_not_count(tmp_path):
    # ddpm-from-scratch: a notebook's own `Toy.backward_sample` (unguarded) is not a call of
    # `DDPM.backward_sample`, whose every caller runs it under inference_mode
    (tmp_path / "sampler.py").write_text(_SAMPLER)
    (tmp_path / "engine.py").write_text(_ENGINE)
    (tmp_path / "toy.py").write_text(_TOY)
    index = api.project_index([str(tmp_path)])
    assert rule(_SAMPLER, "TL201", str(tmp_path / "sampler.py"), index) == []
    view = index.view(str(tmp_path / "sampler.py"))
    assert view.called_guarded(view.local("DDPM"), "backward_sample") is True
    # the near miss: a file without a definition of its own calls it unguarded
    (tmp_path / "toy.py").write_text(_TOY.replace("class Toy:\n    def backward_sample", "class Toy:\n    def other"))
    view = api.project_index([str(tmp_path)]).view(str(tmp_path / "sampler.py"))
    assert view.called_guarded(view.local("DDPM"), "backward_sample") is False


# -- batches of one: volumes and single items (R8/R9/R10 TL301) ---------------------------------

_VOLUMES = (
    "import torch\nfrom torch.utils.data import DataLoader\n{extra}"
    "device = torch.device('cuda')\nmodel = UNet3D().to(device)\nopt = torch.optim.Adam(model.parameters())\n"
    "val_loader = DataLoader(val_ds, batch_size=1, num_workers=4, pin_memory=True)\n"
    "for x, y in val_loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n    opt.step()\n"
)


def test_one_volume_per_batch_in_a_volume_pipeline_is_the_norm():
    # BTCV, brats2020: MONAI's sliding-window inference batches the windows of one volume
    monai = _VOLUMES.format(extra="from monai.inferers import sliding_window_inference\n")
    assert rule(monai, "TL301") == []
    itk = _VOLUMES.format(extra="import SimpleITK as sitk\nvol = sitk.ReadImage('ct.nii')\n")
    assert rule(itk, "TL301") == []
    # the near miss: images, no volumes anywhere
    assert rule(_VOLUMES.format(extra=""), "TL301") == [6]


def test_a_loader_over_one_dataset_item_is_one_look():
    # Segmentation_Report.ipynb: `DataLoader(datasets['valid'][idx], batch_size=1)` for a plot
    src = (
        GPU + "import numpy as np\nfrom torch.utils.data import DataLoader\n"
        "idx = np.random.randint(0, len(datasets['valid']))\n"
        "loader = DataLoader(datasets['valid'][idx], batch_size=1)\n"
        "image_mask = {i: load for i, load in enumerate(iter(loader))}\nshow(image_mask)\n"
    )
    assert rule(src, "TL301") == []
    # the near miss: the whole split, one sample per batch
    assert rule(src.replace("datasets['valid'][idx]", "datasets['valid']"), "TL301") == [7]


# -- lists of tensors (R11 TL402) -----------------------------------------------------------------

_LEVELS = (
    GPU + "class LapSRN(nn.Module):\n    def forward(self, x):\n        res = []\n"
    "        for up in self.ups:\n            x = up(x)\n            res.append(x)\n        return res\n"
    "def validate(loader, model, crit):\n    with torch.no_grad():\n        for batch in loader:\n"
    "            inp, targets = batch[0].to(device), batch[1]\n"
    "            for i in range(len(targets)):\n                targets[i] = targets[i].to(device)\n"
    "            outputs = model(inp)\n            for i in range(len(targets)):\n"
    "                loss = crit(outputs[i], targets[i])\n                log(loss.item())\n"
    "model = LapSRN().to(device)\nvalidate(val_loader, model, nn.L1Loss())\n"
)


def test_elements_replaced_by_moved_copies_make_a_list_not_a_tensor():
    # LapSRN train.py: a pyramid of differently shaped targets, moved one by one
    assert rule(_LEVELS, "TL402") == []
    # the near miss: the targets are one tensor, its rows walked one by one
    near = _LEVELS.replace("targets[i] = targets[i].to(device)", "total = targets[i].sum().item()")
    assert rule(near, "TL402") == [15]


def test_a_dict_batch_entry_replaced_keeps_the_batch_a_batch():
    # `rec["x"] = rec["x"].to(device)` is a dict's entry, not evidence of a list
    src = GPU + "def f(rec):\n    rec['x'] = rec['x'].to(device)\n    return rec\n"
    a = Analysis(cst.parse_module(src), "t.py")
    site = next(c.site for c in a.places.facts.calls if c.method == "to")
    assert a.values.elements_moved("rec", site) is False
    listed = src.replace("rec['x'] = rec['x']", "rec[0] = rec[0]")
    a = Analysis(cst.parse_module(listed), "t.py")
    site = next(c.site for c in a.places.facts.calls if c.method == "to")
    assert a.values.elements_moved("rec", site) is True


# -- chunks of one tensor are not data (R11-012) ------------------------------------------------

_NERF = (
    GPU + "def render(model, rays, get_minibatches, chunksize):\n"
    "    batches = get_minibatches(rays, chunksize=chunksize)\n"
    "    preds = [model(b) for b in batches]\n    out = []\n"
    "    for batch in batches:\n        out.append(model(batch))\n    return torch.cat(out)\n"
    "model = torch.load('nerf.pt').to(device)\nopt = torch.optim.Adam(model.parameters())\n"
    "for i in range(1000):\n    loss = (render(model, rays, mb, 1024) - target).pow(2).mean()\n"
    "    loss.backward()\n    opt.step()\n"
    "    if i % 100 == 0:\n        view = render(model, test_rays, mb, 1024)\n        show(view)\n"
)


def test_a_periodic_render_walking_one_views_ray_chunks_is_one_graph_now_and_then():
    # tiny_nerf.py:304: the held-out view every 100 iterations, its rays in chunks
    assert rule(_NERF, "TL201") == []
    # the near miss: the helper walks a validation loader
    near = _NERF.replace("batches = get_minibatches(rays, chunksize=chunksize)", "batches = val_loader")
    assert rule(near, "TL201") == [18]
