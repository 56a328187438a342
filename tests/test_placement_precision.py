"""Precision and recall of the placement rules (TL100-TL105) on longer,
realistic snippets: the tricky negatives RULES.md names, and positives."""

import textwrap

import libcst as cst
import pytest

from helpers import fix_source, lint_source

PLACEMENT = ("TL100", "TL101", "TL102", "TL103", "TL104", "TL105")


def found(src):
    src = textwrap.dedent(src)
    return sorted((f.code, f.row) for f in lint_source(src, "snippet.py") if f.code in PLACEMENT)


# -- negatives: each must report no placement finding at all ----------------

NEGATIVES = {
    "helper_to_device": """
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model = torch.nn.Linear(4, 2).to(device)
        loader = DataLoader(ds, batch_size=8)
        def to_device(batch):
            return [t.to(device) for t in batch]
        for batch in loader:
            x, y = to_device(batch)
            loss = torch.nn.functional.mse_loss(model(x), y)
    """,
    "helper_rebinds_batch": """
        import torch
        from torch.utils.data import DataLoader
        device = "cuda"
        model = torch.nn.Linear(4, 2).to(device)
        train_loader = DataLoader(ds)
        for batch in train_loader:
            batch = move(batch)
            out = model(**batch)
    """,
    "build_model_device": """
        import torch
        from torch import nn
        def build_model(device):
            model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            model.to(device)
            return model
        device = torch.device("cuda")
        model = build_model(device)
        out = model(torch.zeros(1, 4, device=device))
    """,
    "build_model_returns_moved": """
        import torch
        from torch import nn
        def build_model(device):
            return nn.Linear(4, 4).to(device)
        device = torch.device("cuda")
        model = build_model(device)
        x = torch.from_numpy(features)
        x = x.to(device)
        out = model(x)
    """,
    "branch_moves": """
        import torch
        from transformers import AutoModelForQuestionAnswering, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained("m")
        model = AutoModelForQuestionAnswering.from_pretrained("m")
        inputs = tokenizer("q", "c", return_tensors="pt")
        if torch.cuda.is_available():
            device = torch.device("cuda")
            inputs = inputs.to(device)
            model.to(device)
            predictions = model(**inputs)
        else:
            predictions = model(**inputs)
    """,
    "ddp": """
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP
        local_rank = 0
        model = torch.nn.Linear(4, 2)
        model = DDP(model, device_ids=[local_rank])
        for x, y in train_loader:
            x, y = x.cuda(local_rank), y.cuda(local_rank)
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
    """,
    "data_parallel": """
        import torch
        from torch import nn
        model = nn.DataParallel(nn.Linear(4, 2))
        model.cuda()
        x = load_input()
        out = model(x.cuda())
    """,
    "accelerate": """
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.AdamW(model.parameters())
        model, opt, loader = accelerator.prepare(model, opt, loader)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            opt.step()
    """,
    "lightning": """
        import torch
        import pytorch_lightning as pl
        class Lit(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.net = torch.nn.Linear(4, 2)
            def training_step(self, batch, idx):
                x, y = batch
                return torch.nn.functional.mse_loss(self.net(x), y)
        model = Lit()
        trainer = pl.Trainer(accelerator="gpu")
        trainer.fit(model, torch.utils.data.DataLoader(ds))
    """,
    "fabric": """
        import torch
        from lightning.fabric import Fabric
        fabric = Fabric(accelerator="cuda")
        model = torch.nn.Linear(4, 2)
        model, opt = fabric.setup(model, opt)
        loader = fabric.setup_dataloaders(loader)
        for x, y in loader:
            loss = model(x).sum()
            fabric.backward(loss)
    """,
    "local_dataloader_class": """
        import torch
        class DataLoader:
            def __init__(self, data, device):
                self.data, self.device = data, device
            def __iter__(self):
                for x, y in self.data:
                    yield x.to(self.device), y.to(self.device)
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2).to(device)
        loader = DataLoader(data, device)
        for x, y in loader:
            out = model(x)
    """,
    "cpu_library_helper": """
        import torch
        from torch import nn
        def embed(texts):
            model = nn.Embedding(100, 8)
            ids = torch.tensor([[1, 2, 3]])
            return model(ids)
        class Featurizer:
            def __call__(self, x):
                net = nn.Linear(4, 4)
                return net(torch.randn(1, 4))
    """,
    "module_moved_in_place": """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2)
        model.to(device)
        model.cuda()
        out = model(torch.zeros(1, 4, device=device))
    """,
    "kwargs": """
        import torch
        def make(model, **kwargs):
            x = torch.randn(2, 4, **kwargs)
            return model(x)
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2, **factory_kwargs)
        y = model(torch.zeros(2, 4, device=device))
    """,
    "aliases_moved": """
        import torch as T
        from torch import nn
        from torch.utils.data import DataLoader as DL
        dev = T.device("cuda")
        net = nn.Linear(4, 2).to(dev)
        loader = DL(ds, batch_size=4)
        for xb, yb in loader:
            xb, yb = xb.to(dev), yb.to(dev)
            loss = nn.functional.mse_loss(net(xb), yb)
    """,
    "self_model_attribute": """
        import torch
        from torch import nn
        class Trainer:
            def __init__(self, device):
                self.device = device
                self.model = nn.Linear(4, 2)
            def setup(self):
                self.model.to(self.device)
            def step(self, x):
                return self.model(x.to(self.device))
    """,
    "passed_to_unknown_function": """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2)
        model = wrap_for_inference(model)
        out = model(torch.zeros(1, 4, device=device))
    """,
    "dataset_on_device": """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2).to(device)
        xs = torch.randn(100, 4, device=device)
        ys = torch.randn(100, 2, device=device)
        loader = DataLoader(TensorDataset(xs, ys), batch_size=10)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
    """,
    "default_device": """
        import torch
        torch.set_default_device("cuda")
        model = torch.nn.Linear(4, 2)
        x = torch.randn(1, 4)
        y = model(x)
    """,
    "undefined_names": """
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        model.to(device)
        data, target = data.to(device), target.to(device)
        output = model(data)
        loss = loss_fn(output, target)
    """,
    "tokenizer_moved_inplace": """
        import torch
        from transformers import AutoModel, AutoTokenizer
        device = "cuda"
        tok = AutoTokenizer.from_pretrained("m")
        model = AutoModel.from_pretrained("m", device_map="auto")
        enc = tok("hello", return_tensors="pt")
        enc.to(device)
        out = model(**enc)
    """,
    "module_discarded_move_is_fine": """
        import torch
        class Net(torch.nn.Module):
            pass
        net = Net()
        net.cuda()
        net.to("cuda")
        y = net(torch.zeros(1, device="cuda"))
    """,
    "moved_input_via_cuda": """
        import torch
        model = torch.nn.Linear(2, 2).cuda()
        x = torch.tensor(values)
        x = x.cuda()
        y = model(x)
    """,
    "collate_fn_may_move": """
        import torch
        from torch.utils.data import DataLoader
        device = "cuda"
        model = torch.nn.Linear(2, 2).to(device)
        loader = DataLoader(ds, collate_fn=lambda b: default_collate(b).to(device))
        for x in loader:
            y = model(x)
    """,
    "loader_named_without_loader_kind_in_eval_function_moved": """
        import torch
        def evaluate(model, val_loader, device):
            model.eval()
            with torch.no_grad():
                for images, labels in val_loader:
                    images = images.to(device)
                    labels = labels.to(device)
                    correct = (model(images).argmax(1) == labels).sum()
    """,
    "ddp_scatters_inputs": """
        import torch
        def run(rank):
            torch.cuda.set_device(rank)
            model = Net()
            net = torch.nn.parallel.DistributedDataParallel(model.cuda(rank), device_ids=[rank])
            inp = torch.randn(1, 10)
            out = net(inp)
    """,
    "cpu_function_in_gpu_file": """
        import torch
        from torch import nn
        def gpu_part(x):
            return x.cuda()
        def cpu_reference(x):
            ref = nn.Linear(4, 4)
            inp = torch.randn(2, 4)
            return ref(inp)
    """,
    "deliberate_cpu_layer": """
        import torch
        from torch import nn
        def mixed(rank):
            cpu_layer = nn.Linear(10, 7)
            gpu_layer = nn.Linear(7, 1).cuda(rank)
            inputs = torch.rand(10, 10)
            return gpu_layer(cpu_layer(inputs).cuda(rank))
    """,
    "model_param_without_device_variable": """
        import torch
        def train(model, train_loader, optimizer):
            if torch.cuda.is_available():
                print("cuda")
            for x, y in train_loader:
                loss = model(x).sum()
                loss.backward()
                optimizer.step()
    """,
    "tl100_smoke_block_of_a_model_module": """
        import torch as T
        class Net(T.nn.Module):
            def forward(self, x):
                return x
        if __name__ == "__main__":
            net = Net()
            out = net(T.ones(2))
            print(out.shape, out.device)
    """,
    "tl100_script_that_never_mentions_devices": """
        import torch
        from torch import nn
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            loss.backward()
            opt.step()
    """,
    "weights_replaced_from_elsewhere": """
        import torch
        from torch import nn
        device = torch.device("cuda")
        layer = nn.Linear(10, 7)
        layer.weight = remote_weight()
        out = layer(torch.zeros(1, 10, device=device))
    """,
    "loader_factory_that_places": """
        import torch
        from torch.utils.data import DataLoader
        device = torch.device("cuda")
        def make_loader(ds):
            return DataLoader(ds, collate_fn=lambda b: [t.to(device) for t in default_collate(b)])
        model = torch.nn.Linear(4, 2).to(device)
        loader = make_loader(ds)
        for x, y in loader:
            out = model(x)
    """,
    "moved_through_a_chain": """
        import torch
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2)
        model.half().eval().to(device)
        y = model(torch.zeros(1, 4, device=device, dtype=torch.half))
    """,
    "device_context_manager": """
        import torch
        device = torch.device("cuda")
        with torch.device(device):
            model = torch.nn.Linear(4, 2)
            x = torch.randn(1, 4)
            y = model(x)
    """,
    "attribute_loader_of_unknown_origin": """
        import torch
        class Trainer:
            def __init__(self, model, device):
                self.model = model.to(device)
            def fit(self):
                for x, y in self.train_loader:
                    out = self.model(x)
    """,
}


@pytest.mark.parametrize("name", sorted(NEGATIVES))
def test_negative(name):
    assert found(NEGATIVES[name]) == []


# -- positives: the exact findings expected ---------------------------------

POSITIVES = {
    "tl100_script": (
        """
        import torch
        from torch import nn
        print("GPU:", torch.cuda.is_available())
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(10):
            loss = model(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """,
        [("TL100", 5)],
    ),
    "tl100_main_guard": (
        """
        import torch as T
        class Net(T.nn.Module):
            def forward(self, x):
                return x
        if __name__ == "__main__":
            net = Net()
            opt = T.optim.SGD(net.parameters(), lr=0.1)
            for x, y in loader:
                loss = (net(x) - y).pow(2).mean()
                loss.backward()
                opt.step()
            print(loss.device)
    """,
        [("TL100", 7)],
    ),
    "tl101_with_moved_inputs": (
        """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2)
        x = torch.randn(1, 4).to(device)
        y = model(x)
    """,
        [("TL101", 5), ("TL104", 6)],
    ),
    "tl101_timm": (
        """
        import timm
        import torch
        device = "cuda"
        model = timm.create_model("resnet18")
        model.eval()
        out = model(batch.to(device))
    """,
        [("TL101", 5)],
    ),
    "tl102_factory_in_loop": (
        """
        import torch
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2).to(device)
        for step in range(100):
            noise = torch.randn(64, 4)
            out = model(noise)
    """,
        [("TL102", 6)],
    ),
    "tl102_from_numpy": (
        """
        import numpy as np
        import torch
        device = "cuda"
        model = torch.nn.Linear(4, 2).to(device)
        arr = torch.from_numpy(np.zeros((1, 4), dtype=np.float32))
        out = model(arr)
    """,
        [("TL102", 6)],
    ),
    "tl103_tuple_one_finding": (
        """
        import torch
        from torch.utils.data import DataLoader
        from tqdm import tqdm
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2).to(device)
        criterion = torch.nn.MSELoss()
        train_loader = DataLoader(ds, batch_size=32)
        for epoch in range(3):
            for i, (inputs, targets) in enumerate(tqdm(train_loader)):
                outputs = model(inputs)
                loss = criterion(outputs, targets)
                loss.backward()
    """,
        [("TL103", 11)],
    ),
    "tl103_only_target_unmoved": (
        """
        import torch
        from torch.utils.data import DataLoader
        device = "cuda"
        model = torch.nn.Linear(4, 2).to(device)
        loader = DataLoader(ds)
        for x, y in loader:
            x = x.to(device)
            loss = torch.nn.functional.cross_entropy(model(x), y)
    """,
        [("TL103", 9)],
    ),
    "tl103_dict_batch": (
        """
        import torch
        from torch.utils.data import DataLoader
        device = "cuda"
        model = AutoModel.from_pretrained("m").to(device)
        loader = DataLoader(ds)
        for batch in loader:
            out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    """,
        [("TL103", 8)],
    ),
    "tl105_discarded": (
        """
        import torch
        device = torch.device("cuda")
        model = torch.nn.Linear(4, 2).to(device)
        x = torch.zeros(1, 4)
        x.to(device)
        y = model(x)
    """,
        [("TL105", 6)],
    ),
    "tl103_local_loader_factory": (
        """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        def make_loader(n):
            return DataLoader(TensorDataset(torch.randn(n, 4), torch.randn(n, 2)), batch_size=8)
        def train(model, device):
            model.to(device)
            loader = make_loader(64)
            for inputs, targets in loader:
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
    """,
        [("TL103", 10)],
    ),
    "tl101_module_level_model_used_in_function": (
        """
        import torch
        from torch import nn
        device = torch.device("cuda")
        model = nn.Linear(4, 2)
        def predict(x):
            return model(x.to(device))
    """,
        [("TL101", 5)],
    ),
    "tl102_tokenizer_generate": (
        """
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        device = "cuda" if torch.cuda.is_available() else "cpu"
        tokenizer = AutoTokenizer.from_pretrained("gpt2")
        model = AutoModelForCausalLM.from_pretrained("gpt2").to(device)
        inputs = tokenizer("Hello", return_tensors="pt")
        out = model.generate(**inputs, max_new_tokens=5)
    """,
        [("TL102", 7)],
    ),
    "tl103_trainer_class": (
        """
        import torch
        from torch.utils.data import DataLoader
        class Trainer:
            def __init__(self, model, dataset, device):
                self.device = device
                self.model = model.to(device)
                self.train_loader = DataLoader(dataset, batch_size=32)
            def fit(self):
                for x, y in self.train_loader:
                    loss = torch.nn.functional.mse_loss(self.model(x), y)
                    loss.backward()
    """,
        [("TL103", 11)],
    ),
}


@pytest.mark.parametrize("name", sorted(POSITIVES))
def test_positive(name):
    src, expected = POSITIVES[name]
    assert found(src) == expected


def test_tl103_message_names_every_unmoved_variable():
    src = textwrap.dedent(POSITIVES["tl103_tuple_one_finding"][0])
    (f,) = [f for f in lint_source(src) if f.code == "TL103"]
    assert "`inputs`" in f.message and "`targets`" in f.message


def test_tl103_fix_matches_loop_indentation():
    src = textwrap.dedent(POSITIVES["tl103_tuple_one_finding"][0])
    fixed, remaining = fix_source(src)
    assert "        inputs, targets = inputs.to(device), targets.to(device)\n        outputs = model(inputs)\n" in fixed
    assert not [f for f in remaining if f.code == "TL103"]
    assert fix_source(fixed)[0] == fixed


def test_tl103_dict_fix():
    src = textwrap.dedent(POSITIVES["tl103_dict_batch"][0])
    fixed, remaining = fix_source(src)
    assert "    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}\n" in fixed
    assert not [f for f in remaining if f.code == "TL103"]


def test_tl100_unsafe_fix_then_inputs_follow():
    """TL100's unsafe fix selects a device; TL102's safe fix then moves the input."""
    src = textwrap.dedent(POSITIVES["tl100_script"][0])
    assert fix_source(src)[0] == src  # unsafe: not applied by default
    fixed, remaining = fix_source(src, unsafe=True)
    cst.parse_module(fixed)
    assert 'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n' in fixed
    assert "nn.Linear(8, 1)).to(device)" in fixed
    assert "torch.randn(16, 4, device=device)" in fixed
    assert [f for f in remaining if f.code in PLACEMENT] == []
    assert fix_source(fixed, unsafe=True)[0] == fixed


def test_tl101_no_fix_without_device_variable():
    src = "import torch\nmodel = torch.nn.Linear(2, 2)\ny = model(torch.zeros(2, device='cuda'))\n"
    (f,) = [f for f in lint_source(src) if f.code == "TL101"]
    assert f.fix is None


def test_suppression_comment():
    src = textwrap.dedent(POSITIVES["tl105_discarded"][0]).replace("x.to(device)\n", "x.to(device)  # noqa: TL105\n")
    assert found(src) == []


def test_deterministic_across_runs():
    src = textwrap.dedent(POSITIVES["tl103_tuple_one_finding"][0])
    assert lint_source(src) == lint_source(src)


_TYPE_CAST_GAN = """\
import torch
import torch.nn as nn
from torch.autograd import Variable
from torchvision import datasets, transforms
class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 100)
        self.fc = nn.Linear(100, 784)
    def forward(self, z, labels):
        return self.fc(z * self.emb(labels))
cuda = torch.cuda.is_available()
dataloader = torch.utils.data.DataLoader(
    datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor()), batch_size=64
)
generator = Generator()
if cuda:
    generator.cuda()
FloatTensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor
LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor
optimizer = torch.optim.Adam(generator.parameters())
for epoch in range(10):
    for i, (imgs, labels) in enumerate(dataloader):
        real_imgs = Variable(imgs.type(FloatTensor))
        labels = Variable(labels.type(LongTensor))
        z = Variable(torch.randn(imgs.shape[0], 100).type(FloatTensor))
        loss = generator(z, labels).mean() + real_imgs.mean()
        loss.backward()
        optimizer.step()
"""


def test_a_cast_to_a_cuda_tensor_type_is_a_move():
    # released wild-turn4 PyTorch-GAN acgan.py:208, cgan.py:184, munit.py:178: `labels.type(LongTensor)`
    # with `LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor` copies to the GPU
    found = [(f.code, f.row) for f in lint_source(_TYPE_CAST_GAN, "acgan.py") if f.code in ("TL102", "TL103")]
    assert found == []
    # cast to a host type: the batch stays on the CPU while the generator is on the GPU
    host = _TYPE_CAST_GAN.replace(
        "LongTensor = torch.cuda.LongTensor if cuda else torch.LongTensor", "LongTensor = torch.LongTensor"
    )
    assert [f.code for f in lint_source(host, "acgan.py") if f.code == "TL103"] == ["TL103"]
