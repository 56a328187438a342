"""Causes judged in round 12 (docs/accuracy/rounds/round-12/causes.tsv), each as a fact
of the analysis: a small program in the shape of the real rows, and the near miss that
must still be reported."""

from torchlint import api

from helpers import lint_source


def rule(src: str, code_: str, path: str = "train.py", project=None):
    return [f.row for f in lint_source(src, path, project=project) if f.code == code_]


# -- a dataset over tensors a helper already moved to the device (R12-008..010) ---------------

_TRAFFIC = (
    "import torch\nfrom torch.utils.data import Dataset, DataLoader\n"
    "class TrafficDataset(Dataset):\n    def __init__(self, data, n_his):\n"
    "        self.data = data\n        self.n_his = n_his\n"
    "    def __len__(self):\n        return len(self.data)\n"
    "    def __getitem__(self, idx):\n        return self.data[idx, :self.n_his], self.data[idx, self.n_his:]\n"
    "def data_gen(seq, device):\n    x_train = torch.from_numpy(seq).float().to(device)\n"
    "    x_val = torch.from_numpy(seq).float().to(device)\n"
    "    x_data = {'train': x_train, 'val': x_val}\n    return x_data, seq.mean()\n"
    "def loader_gen(seq, batch_size, device):\n    data, stats = data_gen(seq, device)\n"
    "    trainset = TrafficDataset(data['train'], 12)\n"
    "    return DataLoader(trainset, shuffle=True, batch_size=batch_size)\n"
    "device = torch.device('cuda')\nloader = loader_gen(seq, 50, device)\n"
    "for x, y in loader:\n    loss = model(x.to(device)).sum()\n    loss.backward()\n"
)


def test_a_dataset_over_tensors_a_helper_moved_to_the_device_needs_no_pinning():
    # STGCN data_utils.py: `data_gen` returns a dict of CUDA tensors in a tuple; the
    # dataset's items are slices of them, so there is no host copy to pin
    assert rule(_TRAFFIC, "TL303") == []


def test_the_same_dataset_over_host_tensors_is_still_reported():
    host = _TRAFFIC.replace(".float().to(device)\n", ".float()\n")
    assert rule(host, "TL303") == [19]


# -- a loss unpacked from a criterion's tuple, scaled by AMP before backward (round 12 recall) --

_YOLO = (
    "import torch\nfrom tqdm import tqdm\nclass Trainer:\n"
    "    def train_one_epoch(self, config):\n        pbar = tqdm(self.train_loader)\n"
    "        for images, boxes in pbar:\n            images = images.to(self.device)\n"
    "            boxes = boxes.to(self.device)\n            self.optimizer.zero_grad()\n"
    "            preds = self.model(images)\n"
    "            loss, (conf_loss, iou_loss) = self.loss_fn(preds, boxes)\n"
    "            self.scaler.scale(loss).backward()\n            self.scaler.step(self.optimizer)\n"
    "            self.scaler.update()\n            pbar.set_description(f'Loss:{loss.item():4.4g}')\n"
)


def test_a_loss_unpacked_from_a_criterion_and_scaled_before_backward_is_on_the_device():
    # simple-yolo yolo_trainer.py:70: `loss, (...) = self.loss_fn(preds, ...)`, then
    # `self.scaler.scale(loss).backward()`: the `.item()` reads a device loss every step
    assert rule(_YOLO, "TL401") == [15]


def test_the_parts_of_the_criterion_tuple_that_never_reach_backward_stay_unknown():
    # `conf_loss` may be a Python float (the criterion returns `.item()`s): not reported
    src = _YOLO.replace("{loss.item():4.4g}", "{conf_loss.item():4.4g}")
    assert rule(src, "TL401") == []


def test_a_loss_divided_for_accumulation_still_reaches_backward():
    src = _YOLO.replace("self.scaler.scale(loss).backward()", "(loss / 4).backward()")
    assert rule(src, "TL401") == [15]


# -- TensorBoard's add_scalar reads a device tensor on the host (round 12 recall) ----------------

_TB = (
    "import torch\nfrom torch.utils.tensorboard import SummaryWriter\n"
    "device = torch.device('cuda')\nmodel = Net().to(device)\nwriter = SummaryWriter()\n"
    "for step, (x, y) in enumerate(loader):\n    loss = crit(model(x.to(device)), y.to(device))\n"
    "    loss.backward()\n    opt.step()\n"
)


def test_add_scalar_of_a_device_loss_every_step_syncs():
    assert rule(_TB + "    writer.add_scalar('train/loss', loss.detach(), step)\n", "TL401") == [10]
    assert rule(_TB + "    writer.add_scalar('train/loss', scalar_value=loss, global_step=step)\n", "TL401") == [10]


def test_add_scalar_of_a_python_number_or_every_n_steps_is_silent():
    lr = "    writer.add_scalar('lr', opt.param_groups[0]['lr'], step)\n"
    assert rule(_TB + lr, "TL401") == []
    periodic = "    if step % 100 == 0:\n        writer.add_scalar('train/loss', loss, step)\n"
    assert rule(_TB + periodic, "TL401") == []


def test_add_scalar_of_the_files_own_logger_class_or_with_starred_arguments_is_silent():
    own = (
        "class Logger:\n    def __init__(self):\n        self.rows = []\n"
        "    def add_scalar(self, tag, value, step):\n        self.rows.append((tag, value, step))\n"
    )
    src = _TB.replace("writer = SummaryWriter()\n", own + "writer = Logger()\n")
    assert rule(src + "    writer.add_scalar('train/loss', loss, step)\n", "TL401") == []
    assert rule(_TB + "    writer.add_scalar(*row)\n", "TL401") == []


def test_a_logging_helper_the_loop_calls_every_step_is_reported_at_the_call():
    src = _TB.replace(
        "writer = SummaryWriter()\n",
        "writer = SummaryWriter()\ndef log(tag, value, step):\n    writer.add_scalar(tag, value, step)\n",
    )
    assert rule(src + "    log('train/loss', loss, step)\n", "TL401") == [12]


# -- a loader factory of another file, feeding a GPU loop (round 12 recall; issue 39 shape 5) -----

_FACTORY = (
    "from torch.utils.data import DataLoader\nfrom torchvision import transforms\n"
    "from torchvision.datasets import ImageFolder\n"
    "def load_dataset(root_dir, batch_size):\n"
    "    data = ImageFolder(root=root_dir, transform=transforms.ToTensor())\n"
    "    data_loader = DataLoader(data, batch_size=batch_size, shuffle=True)\n"
    "    return data_loader\n"
    "def show_batch(root_dir):\n"
    "    loader = DataLoader(ImageFolder(root=root_dir), batch_size=16)\n"
    "    plot(next(iter(loader)))\n"
)
_TRAIN = (
    "import torch\nimport utils\nmodel = Net().cuda()\nopt = torch.optim.Adam(model.parameters())\n"
    "loader = utils.load_dataset('data', 64)\n"
    "for epoch in range(10):\n    for x, _ in loader:\n        loss = model(x.cuda()).sum()\n"
    "        loss.backward()\n        opt.step()\n"
)


def _factory_project(tmp_path, train: str):
    (tmp_path / "utils.py").write_text(_FACTORY)
    (tmp_path / "train.py").write_text(train)
    return api.project_index([str(tmp_path)])


def test_a_loader_factory_whose_caller_trains_on_the_gpu_is_reported_in_its_own_file(tmp_path):
    # celeba-gan-pytorch utils.py:112: `load_dataset` decodes JPEGs in the main process and
    # the caller (train.py) copies every batch to CUDA; utils.py itself names no device
    index = _factory_project(tmp_path, _TRAIN)
    path = str(tmp_path / "utils.py")
    assert rule(_FACTORY, "TL302", path, index) == [6]
    assert rule(_FACTORY, "TL303", path, index) == [6]


def test_a_loader_factory_nothing_on_an_accelerator_imports_stays_silent(tmp_path):
    index = _factory_project(tmp_path, _TRAIN.replace(".cuda()", ""))
    path = str(tmp_path / "utils.py")
    assert rule(_FACTORY, "TL302", path, index) == []
    assert rule(_FACTORY, "TL303", path, index) == []
    # and without the project (the file alone), nothing says it feeds a GPU
    assert rule(_FACTORY, "TL302", path) == []


def test_a_loader_factory_whose_module_a_gpu_file_imports_for_another_name_stays_silent(tmp_path):
    # the GPU file imports `utils` (or a name from it) but never names the factory, which
    # only a CPU plotting script calls: nothing says its loader feeds a GPU
    factory = _FACTORY + "def seed_all(n):\n    return n\n"
    (tmp_path / "plot.py").write_text("import utils\nloader = utils.load_dataset('data', 8)\n")
    path = str(tmp_path / "utils.py")
    train = _TRAIN.replace("loader = utils.load_dataset('data', 64)\n", "loader = build()\n")
    for imports in ("import utils\nutils.seed_all(0)\n", "from utils import seed_all\nseed_all(0)\n"):
        (tmp_path / "utils.py").write_text(factory)
        (tmp_path / "train.py").write_text(train.replace("import utils\n", imports))
        index = api.project_index([str(tmp_path)])
        assert rule(factory, "TL302", path, index) == []
        assert rule(factory, "TL303", path, index) == []
    # a GPU file that imports the factory by name is its caller: reported
    named = _TRAIN.replace("import utils\n", "from utils import load_dataset\n")
    (tmp_path / "train.py").write_text(named.replace("utils.load_dataset", "load_dataset"))
    index = api.project_index([str(tmp_path)])
    assert rule(factory, "TL302", path, index) == [6]


# -- the legacy `imgs.type(Tensor)` copy to the GPU (wild: PyTorch-GAN) ------------------------

_GAN = (
    "import torch\nfrom torch.autograd import Variable\nfrom torchvision import datasets, transforms\n"
    "cuda = True if torch.cuda.is_available() else False\ngenerator = Generator()\n"
    "if cuda:\n    generator.cuda()\n"
    "dataloader = torch.utils.data.DataLoader(\n"
    "    datasets.MNIST('data', train=True, transform=transforms.ToTensor()), batch_size=64, shuffle=True)\n"
    "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n"
    "for epoch in range(10):\n    for i, (imgs, _) in enumerate(dataloader):\n"
    "        real_imgs = Variable(imgs.type(Tensor))\n        loss = generator(real_imgs).mean()\n"
    "        loss.backward()\n"
)


def test_a_batch_cast_to_a_cuda_tensor_type_is_copied_to_the_gpu():
    # PyTorch-GAN began.py:116: `imgs.type(Tensor)` with `Tensor = torch.cuda.FloatTensor if
    # cuda else ...` copies every batch to the GPU, as `.cuda()` would: pinning pays
    assert rule(_GAN, "TL303") == [8]
    assert rule(_GAN.replace("imgs.type(Tensor)", "imgs.type('torch.cuda.FloatTensor')"), "TL303") == [8]


def test_a_cuda_tensor_type_chosen_by_an_if_statement_or_of_bfloat16_is_a_copy_to_the_gpu():
    branches = "if cuda:\n    Tensor = torch.cuda.FloatTensor\nelse:\n    Tensor = torch.FloatTensor\n"
    src = _GAN.replace("Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\n", branches)
    assert rule(src, "TL303") == [8]
    assert rule(_GAN.replace("torch.cuda.FloatTensor if", "torch.cuda.BFloat16Tensor if"), "TL303") == [8]


def test_a_batch_cast_to_a_host_tensor_type_is_no_copy_to_the_gpu():
    host = _GAN.replace("Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor", "Tensor = torch.FloatTensor")
    assert rule(host, "TL303") == []


# -- a synchronize in one function does not make the file's evaluation a benchmark (wild: mae) ----

_ENGINE_MAE = (
    "import torch\nimport util.misc as misc\n"
    "def train_one_epoch(model, criterion, data_loader, optimizer, device, loss_scaler):\n"
    "    for samples, targets in data_loader:\n        samples = samples.to(device, non_blocking=True)\n"
    "        loss = criterion(model(samples), targets.to(device))\n"
    "        loss_scaler(loss, optimizer, parameters=model.parameters())\n        torch.cuda.synchronize()\n"
    "@torch.no_grad()\ndef evaluate(data_loader, model, device):\n    criterion = torch.nn.CrossEntropyLoss()\n"
    "    metric_logger = misc.MetricLogger(delimiter='  ')\n    model.eval()\n"
    "    for batch in data_loader:\n        images = batch[0].to(device, non_blocking=True)\n"
    "        target = batch[-1].to(device, non_blocking=True)\n        output = model(images)\n"
    "        loss = criterion(output, target)\n        metric_logger.update(loss=loss.item())\n"
)


def test_an_evaluation_beside_a_synchronized_training_function_is_no_benchmark():
    # mae engine_finetune.py:122: `torch.cuda.synchronize()` in `train_one_epoch` (whose
    # backward runs in another file's loss scaler) made the whole file read as a benchmark
    assert rule(_ENGINE_MAE, "TL401", "engine_finetune.py") == [19]


def test_a_file_whose_only_loop_is_timed_still_reads_as_a_benchmark():
    timed = _ENGINE_MAE.split("@torch.no_grad()")[0] + (
        "def measure(model, x):\n    for _ in range(10):\n        out = model(x)\n"
        "        torch.cuda.synchronize()\n        print(out.sum().item())\n"
    )
    assert rule(timed, "TL401", "engine_finetune.py") == []


_TIMED = (
    "import time\nimport torch\nfrom torch.utils.data import DataLoader\n"
    "from torchvision import datasets, transforms\n"
    "device = torch.device('cuda')\nmodel = Net().to(device)\n"
    "loader = DataLoader(datasets.MNIST('d', transform=transforms.ToTensor()), batch_size=64)\n"
    "def now():\n    torch.cuda.synchronize()\n    return time.perf_counter()\n"
    "def run(model, loader):\n    start = now()\n    for x, y in loader:\n"
    "        out = model(x.to(device))\n        print(out.sum().item())\n    return now() - start\n"
    "print(run(model, loader))\n"
)


def test_a_script_whose_only_loop_is_timed_reads_as_a_benchmark_also_through_a_clock_helper():
    # the loader is the benchmark's setting: silent at module level as in the timed loop
    inline = _TIMED.replace("    start = now()\n", "    start = time.perf_counter()\n").replace(
        "    return now() - start\n", "    torch.cuda.synchronize()\n    return time.perf_counter() - start\n"
    )
    for src in (inline, _TIMED):
        assert rule(src, "TL302", "speed.py") == []
        assert rule(src, "TL401", "speed.py") == []


def test_an_untimed_evaluation_beside_the_timed_loop_is_real_work():
    src = _TIMED + (
        "def evaluate(model, loader):\n    for x, y in loader:\n"
        "        out = model(x.to(device))\n        print(out.sum().item())\n"
    )
    assert rule(src, "TL302", "speed.py") == [7]
    assert rule(src, "TL401", "speed.py") == [21]  # not the timed loop's line 15


def test_numpy_noise_handed_to_a_cuda_tensor_type_every_step_is_made_on_the_host():
    # PyTorch-GAN wgan_gp.py:159: `z = Tensor(np.random.normal(0, 1, (b, d)))`: drawn by NumPy
    # on the host each step, then copied to the GPU by the CUDA tensor type
    src = _GAN.replace(
        "        loss = generator(real_imgs).mean()\n",
        "        z = Variable(Tensor(np.random.normal(0, 1, (imgs.shape[0], 100))))\n"
        "        loss = generator(real_imgs).mean() + generator(z).mean()\n",
    ).replace("import torch\n", "import numpy as np\nimport torch\n", 1)
    assert rule(src, "TL104") == [15]


def test_numpy_data_for_a_host_tensor_type_or_made_once_is_silent():
    src = _GAN.replace("import torch\n", "import numpy as np\nimport torch\n", 1)
    once = src.replace(
        "for epoch in range(10):\n", "z = Tensor(np.random.normal(0, 1, (64, 100)))\nfor epoch in range(10):\n"
    )
    assert rule(once, "TL104") == []
    step = "        z = Tensor(np.random.normal(0, 1, (imgs.shape[0], 100)))\n"
    host = src.replace("Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor", "Tensor = torch.FloatTensor")
    assert rule(host.replace("        loss = generator", step + "        loss = generator"), "TL104") == []


# -- a dataset chosen in branches is what every branch builds (pool: wind-forecasting) ---------

_BRANCHES = (
    "import torch\nfrom torch.utils.data import Dataset, DataLoader\n"
    "class MLPDataset(Dataset):\n    def __init__(self, df):\n        self.X = torch.tensor(df.values)\n"
    "    def __len__(self):\n        return len(self.X)\n"
    "    def __getitem__(self, idx):\n        return self.X[idx]\n"
    "class LSTMDataset(MLPDataset):\n    pass\n"
    "device = torch.device('cuda')\nmodel = Net().to(device)\n"
    "if kind == 'mlp':\n    ds = MLPDataset(df)\nelse:\n    ds = {other}(df)\n"
    "loader = DataLoader(ds, batch_size=64, shuffle=True)\n"
    "for x in loader:\n    model(x.to(device)).sum().backward()\n"
)


def test_a_dataset_every_branch_builds_in_memory_needs_no_workers():
    assert rule(_BRANCHES.format(other="MLPDataset"), "TL302") == []


def test_a_dataset_one_branch_reads_from_files_still_needs_workers():
    src = _BRANCHES.format(other="ImageFolder").replace(
        "import torch\n", "import torch\nfrom torchvision.datasets import ImageFolder\n", 1
    )
    assert rule(src, "TL302") == [19]


def test_a_batch_unpacked_in_the_body_is_the_batch_as_loaded():
    # pytorch-beginner Logistic_Regression.py:28: `img, label = data`, a view, then `.cuda()`
    src = (
        "import torch\nfrom torchvision import datasets, transforms\nfrom torch.utils.data import DataLoader\n"
        "train_dataset = datasets.FashionMNIST(root='d', train=True, transform=transforms.ToTensor())\n"
        "train_loader = DataLoader(train_dataset, batch_size=64, shuffle=True)\n"
        "model = Net()\nuse_gpu = torch.cuda.is_available()\nif use_gpu:\n    model = model.cuda()\n"
        "for epoch in range(10):\n    for i, data in enumerate(train_loader, 1):\n        img, label = data\n"
        "        img = img.view(img.size(0), -1)\n        if use_gpu:\n            img = img.cuda()\n"
        "            label = label.cuda()\n        loss = crit(model(img), label)\n        loss.backward()\n"
    )
    assert rule(src, "TL303") == [5]
    # the near miss: the images are remade on the host before their copy, so pinning
    # would speed up only the labels' copy (no gain worth a finding)
    remade = src.replace("img = img.view(img.size(0), -1)", "img = augment(img)")
    assert rule(remade, "TL303") == []


def test_a_batch_unpacked_element_by_element_with_its_move_is_the_batch_as_loaded():
    # LapSRN train.py:118: `input, targets = batch[0].to(device), batch[1]`, then each
    # target level moved in place: every copy is from the batch as loaded
    src = (
        "import torch\nfrom torch.utils.data import DataLoader\n"
        "device = torch.device('cuda')\nmodel = LapSRN().to(device)\n"
        "train_dataloader = DataLoader(dataset=get_training_set('d'), batch_size=64, shuffle=True)\n"
        "for batch in train_dataloader:\n    input, targets = batch[0].to(device), batch[1]\n"
        "    for _ in range(3):\n        targets[_] = targets[_].to(device)\n"
        "    loss = model(input)[0].sum()\n    loss.backward()\n"
    )
    assert rule(src, "TL303") == [5]
    remade = src.replace("batch[0].to(device), batch[1]", "batch[0].to(device), crop(batch[1])")
    assert rule(remade, "TL303") == []
