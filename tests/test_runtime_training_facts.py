"""`torchlint run`'s observations of a training loop as a whole: batches of
one fed to the model, the profiler torch.profiler makes for itself, and a
process group asked for NCCL on the simulated GPU."""

import pytest

from torchlint.runtime.distributed import gloo_backend
from torchlint.runtime.observations import Clock, Status

from runtime_scripts import line_of, only, reported, run, script

LOOP = """
model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x = torch.randn({batch}, 10, device=device)
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_training_on_batches_of_one_is_reported_per_step(tmp_path):
    path = script(tmp_path, LOOP.format(batch=1))
    report = run(path)
    assert report.status is Status.OK, report.error
    o = only(report, "TL301")
    assert (o.site.line, o.count, o.steps_seen, o.steps, o.clock, o.per_step) == (
        line_of(path, "loss = model(x)"),
        4,
        4,
        4,
        Clock.OPTIMIZER,
        True,
    )
    assert "(1, 10)" in o.message


def test_training_on_real_batches_is_not_batch_size_one(tmp_path):
    assert reported(run(script(tmp_path, LOOP.format(batch=8)))) == []


def test_one_sample_evaluated_or_once_is_not_batch_size_one(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(8, 10, device=device)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            model.eval()
            with torch.no_grad():
                print(model(torch.randn(1, 10, device=device)).argmax(1).tolist()[:0])
            model.train()
        model(torch.randn(1, 10, device=device)).sum().backward()
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    assert [o for o in report.findings if o.code == "TL301"] == []
    once = [o for o in report.observations if o.code == "TL301"]
    assert [(o.count, o.reported) for o in once] == [(1, False)]  # seen once, after training: not per step


def test_torch_profiler_is_not_the_legacy_profiler(tmp_path):
    # torch.profiler.profile makes a torch.autograd.profiler.profile of its own: not the user's.
    path = script(
        tmp_path,
        """
        model = Net().to(device)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            model(torch.randn(2, 10, device=device))
        with torch.autograd.profiler.profile() as legacy:
            model(torch.randn(2, 10, device=device))
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    assert reported(report) == [("TL501", line_of(path, "torch.autograd.profiler.profile"), 1)]


@pytest.mark.parametrize(
    "asked, used",
    [
        ("nccl", "gloo"),
        ("NCCL", "gloo"),
        ("cpu:gloo,cuda:nccl", "gloo"),
        ("gloo", "gloo"),
        ("mpi", "mpi"),
        (None, None),
    ],
)
def test_nccl_becomes_gloo(asked, used):
    assert gloo_backend(asked) == used


def test_distributed_data_parallel_on_the_simulated_gpu(tmp_path):
    path = script(
        tmp_path,
        """
        import os
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", "29533"
        dist.init_process_group("nccl", rank=0, world_size=1)
        model = DistributedDataParallel(Net().to(device), device_ids=[0])
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(4, 10, device=device)).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("backend", dist.get_backend())
        dist.destroy_process_group()
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    assert reported(report) == [] and report.device_used and report.steps == 3
