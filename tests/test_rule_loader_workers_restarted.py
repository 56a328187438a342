"""TL304 loader-workers-restarted: loaders with workers, iterated again every epoch."""

import textwrap

import pytest

from helpers import fix_source, lint_source, run_fixed_pair

HEAD = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
device = torch.device("cuda")
model = nn.Linear(4, 2).to(device)
"""


def rows(src, path="train.py"):
    return [f.row for f in lint_source(HEAD + textwrap.dedent(src), path) if f.code == "TL304"]


def test_epoch_loop_over_a_loader_with_workers():
    assert rows(
        """\
        loader = DataLoader(ds, batch_size=32, num_workers=4)
        for epoch in range(10):
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    ) == [6]
    # a `while` around an enumerate/tqdm pass counts as well
    assert rows(
        """\
        loader = DataLoader(ds, num_workers=2)
        step = 0
        while step < 1000:
            for i, (x, y) in enumerate(tqdm(loader)):
                model(x.to(device)).sum().backward()
                step += 1
        """
    ) == [6]


def test_passes_through_functions_the_epoch_loop_calls():
    src = """\
        def train_one_epoch(model, data):
            for x, y in data:
                model(x.to(device)).sum().backward()
        def evaluate(model, data):
            with torch.no_grad():
                for x, y in data:
                    model(x.to(device))
        def main():
            train_loader = DataLoader(ds, num_workers=4)
            val_loader = DataLoader(ds, num_workers=4)
            test_loader = DataLoader(ds, num_workers=4)
            for epoch in range(10):
                train_one_epoch(model, train_loader)
                evaluate(model, val_loader)
            evaluate(model, test_loader)
        """
    # train and validation restart every epoch; the test loader runs once
    assert rows(src) == [14, 15]
    # the message quotes the loop's header, not the comment above it
    commented = src.replace(
        "            for x, y in data:\n                model(x.to(device)).sum()",
        "            # one pass\n            for x, y in data:\n                model(x.to(device)).sum()",
    )
    messages = [f.message for f in lint_source(HEAD + textwrap.dedent(commented), "train.py") if f.code == "TL304"]
    assert messages and all("(`for x, y in data:` runs again and again)" in m for m in messages)


def test_tricky_negatives():
    # the loader is built anew each epoch: its workers start anyway
    assert not rows(
        """\
        for epoch in range(10):
            loader = DataLoader(make_split(epoch), num_workers=4)
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    # evaluated every tenth epoch only
    assert not rows(
        """\
        def evaluate(data):
            for x, y in data:
                model(x.to(device))
        val_loader = DataLoader(ds, num_workers=4)
        for epoch in range(100):
            if epoch % 10 == 0:
                evaluate(val_loader)
        """
    )
    # `num_workers` bound to 0: no workers to restart
    assert not rows(
        """\
        workers = 0
        loader = DataLoader(ds, num_workers=workers)
        for epoch in range(10):
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    # workers from an option that defaults to 0 (the script as written has none), or from an
    # expression we cannot read
    assert not rows(
        """\
        parser.add_argument("--num_workers", type=int, default=0)
        args = parser.parse_args()
        loader = DataLoader(ds, num_workers=args.num_workers)
        for epoch in range(10):
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    assert not rows(
        """\
        loader = DataLoader(ds, num_workers=cfg.data.workers)
        for epoch in range(10):
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    # persistent already (through a keyword expression counts)
    assert not rows(
        """\
        loader = DataLoader(ds, num_workers=args.workers, persistent_workers=args.workers > 0)
        for epoch in range(10):
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    # a pass that stops at the first batch, in a loop over models
    assert not rows(
        """\
        loader = DataLoader(ds, num_workers=4)
        for name in ("a", "b"):
            for x, y in loader:
                print(model(x.to(device)).shape)
                break
        """
    )
    # unit tests
    assert not rows(
        """\
        def test_loader():
            loader = DataLoader(ds, num_workers=2)
            for epoch in range(2):
                for x, y in loader:
                    model(x.to(device))
        """,
        path="tests/test_data.py",
    )


def test_fix_and_when_it_is_withheld():
    src = HEAD + textwrap.dedent(
        """\
        parser.add_argument("--workers", type=int, default=8)
        args = parser.parse_args()
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler, num_workers=args.workers)
        for epoch in range(10):
            sampler.set_epoch(epoch)
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    fixed, _ = fix_source(src, "train.py", unsafe=True)
    assert (
        "num_workers=args.workers, pin_memory=torch.cuda.is_available(), persistent_workers=args.workers > 0)" in fixed
    )
    # the dataset itself changes between epochs: the workers would keep the old copy
    changing = HEAD + textwrap.dedent(
        """\
        loader = DataLoader(ds, num_workers=4)
        for epoch in range(10):
            ds.crop = 64 + epoch
            for x, y in loader:
                model(x.to(device)).sum().backward()
        """
    )
    assert [f.code for f in lint_source(changing, "train.py") if f.code == "TL304"] == ["TL304"]
    assert "persistent_workers" not in fix_source(changing, "train.py", unsafe=True)[0]
    # a seeded run: persistent workers stop drawing a worker seed from the global generator each
    # epoch, so the later epochs' order and augmentations change (round 6, fix:R6-015)
    seeded = src.replace(
        "sampler = DistributedSampler(ds)", "torch.manual_seed(args.seed)\nsampler = DistributedSampler(ds)"
    )
    assert [f.code for f in lint_source(seeded, "train.py") if f.code == "TL304"] == ["TL304"]
    assert "persistent_workers" not in fix_source(seeded, "train.py", unsafe=True)[0]


@pytest.mark.slow
def test_fixed_script_runs_the_same(tmp_path):
    src = textwrap.dedent(
        """\
        import torch
        from torch.utils.data import DataLoader, Dataset


        class Squares(Dataset):
            def __len__(self):
                return 16

            def __getitem__(self, i):
                return torch.tensor([float(i)]), torch.tensor([float(i * i)])


        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(1, 1).to(device)
            loader = DataLoader(Squares(), batch_size=4, num_workers=2)
            seen = 0
            for epoch in range(3):
                for x, y in loader:
                    model(x.to(device))
                    seen += int(y.sum())
            print(seen)


        if __name__ == "__main__":
            main()
        """
    )
    fixed, before, after = run_fixed_pair(tmp_path, src)
    assert "num_workers=2, pin_memory=torch.cuda.is_available(), persistent_workers=True)" in fixed
    assert before == after == str(3 * sum(i * i for i in range(16)))
    again, _ = fix_source(fixed, "script.py", unsafe=True)
    assert again == fixed
    assert not [f for f in lint_source(fixed, "script.py") if f.code == "TL304"]
