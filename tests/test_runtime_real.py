"""`torchlint run --device cuda`, the real-GPU run, exercised on the CPU: a device of the
tests' own (torch's `meta` device, which has tensors, device mismatches and no values) with
a fake clock, handed to the same session a CUDA device is handed to; the timer, the
sampler and the summary line on that clock; the option and the no-CUDA error."""

import json

import pytest
import torch
from click.testing import CliRunner

from torchlint.doors.cli import main
from torchlint.runtime import cuda
from torchlint.runtime.observations import Clock, RunTimings, Status
from torchlint.runtime.report import render_report
from torchlint.runtime.timing import Sampler, Timer, timings_line

from runtime_scripts import line_of, only, reported, run, script

TICK = 0.001  # the fake clock advances this much at each reading
DRAIN = 0.25  # and this much while the device drains


class FakeEvent:
    def __init__(self, device):
        self.device = device
        self.at = None

    def record(self):
        self.at = self.device.t

    def elapsed_time(self, end_event):
        return (end_event.at - self.at) * 1000.0


class FakeDevice:
    """timing.Device on torch's meta device, with a clock of its own."""

    type = "meta"
    name = "Fake GPU"

    def __init__(self, utilization=None):
        self.t = 0.0
        self.drains = 0
        self._utilization = utilization

    def now(self):
        self.t += TICK
        return self.t

    def drain(self):
        self.drains += 1
        self.t += DRAIN

    def event(self):
        return FakeEvent(self)

    def used(self):
        return True

    def utilization(self):
        if self._utilization is None:
            return None, cuda.NO_NVML
        return (lambda: self._utilization), ""


# -- the timer, the sampler, the line -------------------------------------------------------------


def test_the_host_wait_is_the_drain_between_two_readings():
    device = FakeDevice()
    timer = Timer(device)
    assert timer.waited() == pytest.approx(DRAIN + TICK)
    assert device.drains == 1
    result, seconds = timer.timed(lambda a, b=0: a + b, 2, b=3)
    assert result == 5 and seconds == pytest.approx(TICK)


def test_step_times_come_from_the_marks_host_and_device():
    device = FakeDevice()
    timer = Timer(device)
    for _ in range(3):
        timer.tick(Clock.OPTIMIZER)
        device.t += 0.5  # the step's work
    host, on_device = timer.step_times(Clock.OPTIMIZER)
    assert host == pytest.approx([0.5 + TICK, 0.5 + TICK])
    assert on_device == pytest.approx([0.5 + TICK, 0.5 + TICK])
    assert timer.step_times(Clock.BATCHES) == ([], [])


def test_the_sampler_reads_and_keeps_a_reading_and_notes_a_failure():
    values = iter([40.0, 60.0])
    sampler = Sampler(lambda: next(values))
    sampler.sample()
    sampler.sample()
    assert sampler.values == [40.0, 60.0]
    sampler.sample()  # the reader fails (StopIteration): sampling stops, with why
    assert sampler.failed.startswith("StopIteration")
    threaded = Sampler(lambda: 75.0, interval=0.01)
    threaded.start()
    threaded.stop()  # at least one reading, however soon it is stopped
    assert threaded.values and set(threaded.values) == {75.0}


def _timings(**changes):
    base = dict(
        device="Fake GPU",
        clock=Clock.OPTIMIZER,
        steps=19,
        step_s=0.0123,
        device_step_s=0.0121,
        sync_wait_s=0.0451,
        syncs=40,
        sync_sites=2,
        loader_wait_s=0.128,
        batches=40,
        utilization=87.2,
        utilization_samples=52,
    )
    base.update(changes)
    return RunTimings(**base)


def test_the_summary_line():
    assert timings_line(_timings()) == (
        "GPU timings (Fake GPU): step 12.3 ms (median of 19 optimizer step intervals; device 12.1 ms); "
        "the host waited 45.1 ms at 2 sync sites (40 syncs); loader wait 3.2 ms per batch (40 batches); "
        "GPU utilization 87% (52 NVML samples)"
    )
    bare = _timings(
        steps=0, step_s=None, device_step_s=None, syncs=0, sync_sites=0, batches=0, utilization=None, note=cuda.NO_NVML
    )
    assert timings_line(bare) == (
        "GPU timings (Fake GPU): step time not measured (fewer than two optimizer steps); "
        "no sync of your code was timed; " + cuda.NO_NVML
    )


# -- a run on the device -----------------------------------------------------------------------------

TRAIN = """\
import torch
from torch import nn

model = nn.Linear(4, 2).to("meta")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    model.to("meta")
    x = torch.randn(8, 4).to("meta")
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    try:
        loss.item()  # timed, then it raises: meta tensors have no values
    except RuntimeError:
        pass
    torch.cuda.synchronize()
"""


@pytest.fixture
def cuda_syncs(monkeypatch):
    """`torch.cuda.synchronize` (public API), which a CPU build cannot run, counted instead."""
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: calls.append(a))
    return calls


def test_a_run_on_the_device_reports_what_it_observed_with_the_timings(tmp_path, cuda_syncs):
    path = script(tmp_path, TRAIN, header=False)
    device = FakeDevice(utilization=50.0)
    report = run(path, real_device=device)
    assert report.status is Status.OK, report.error
    assert report.device == "Fake GPU" and report.device_used
    assert reported(report) == [
        ("TL106", line_of(path, 'model.to("meta")'), 4),
        ("TL104", line_of(path, "randn"), 4),
        ("TL401", line_of(path, "loss.item()"), 4),
        ("TL403", line_of(path, "synchronize"), 4),
    ]
    read = only(report, "TL401")
    assert dict(read.timings) == pytest.approx(
        {"wait_s": 4 * (DRAIN + TICK), "wait_mean_s": DRAIN + TICK, "wait_max_s": DRAIN + TICK}
    )
    assert "0.25" not in read.message and read.message.startswith("`.item()` copies a value from the GPU")
    assert len(cuda_syncs) == 4  # the script's own synchronize still ran
    assert dict(only(report, "TL403").timings)["wait_s"] == pytest.approx(4 * TICK)
    assert dict(only(report, "TL104").timings) == {}  # a copy: not a sync
    t = report.timings
    assert (t.device, t.clock, t.steps, t.syncs, t.sync_sites) == ("Fake GPU", Clock.OPTIMIZER, 3, 8, 2)
    assert t.sync_wait_s == pytest.approx(4 * (DRAIN + TICK) + 4 * TICK)
    assert t.step_s > DRAIN and t.device_step_s > DRAIN  # a step holds a drain
    assert t.utilization == 50.0 and t.utilization_samples >= 1 and t.note == ""
    text = render_report(report, "text", str(tmp_path))
    assert "ran to its end after 4 optimizer steps on the GPU (Fake GPU)" in text
    assert "GPU timings (Fake GPU): step " in text and "the host waited 1.01 s at 2 sync sites (8 syncs)" in text
    (item, *_) = [i for i in json.loads(render_report(report, "json", str(tmp_path))) if i["code"] == "TL401"]
    assert set(item["runtime"]["timings"]) == {"wait_s", "wait_mean_s", "wait_max_s"}
    assert item["runtime"]["timings"]["wait_s"] == pytest.approx(4 * (DRAIN + TICK))


def test_a_mismatch_raises_and_is_the_crash_finding_at_the_users_line(tmp_path):
    path = script(
        tmp_path,
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 2)
        x = torch.randn(8, 4, device="meta")
        out = model(x)
        print("not reached")
        """,
        header=False,
    )
    report = run(path, real_device=FakeDevice())
    assert report.status is Status.FAILED and report.error.type == "RuntimeError"
    assert report.error.site.line == line_of(path, "model(x)")
    found = only(report, "TL101")
    assert found.crash and found.site.line == line_of(path, "model(x)") and found.count == 1
    assert "`Linear` has its parameter" in found.message
    assert report.timings.note == cuda.NO_NVML and report.timings.utilization is None


def test_a_host_tensor_given_to_a_model_on_the_device_is_tl102(tmp_path):
    path = script(
        tmp_path,
        """\
        import torch
        from torch import nn

        model = nn.Linear(4, 2).to("meta")
        out = model(torch.randn(8, 4))
        """,
        header=False,
    )
    report = run(path, real_device=FakeDevice())
    assert report.status is Status.FAILED
    found = only(report, "TL102")
    assert found.crash and found.site.line == line_of(path, "model(")
    assert "made by the script" in found.message


def test_loaders_are_timed_per_batch(tmp_path):
    path = script(
        tmp_path,
        """\
        loader = DataLoader(Items(), batch_size=8)
        model = Net().to("meta")
        for x, y in loader:
            model(x.to("meta"))
        """,
    )
    report = run(path, real_device=FakeDevice())
    assert report.status is Status.OK, report.error
    assert [o.code for o in report.findings] == ["TL302", "TL303", "TL201"]  # TL201: no backward, no no_grad
    timings = dict(only(report, "TL302").timings)
    assert set(timings) == {"wait_s", "wait_per_batch_s", "busy_s"}
    assert timings["wait_per_batch_s"] == pytest.approx(timings["wait_s"] / 4)
    t = report.timings
    assert (t.clock, t.batches, t.steps) == (Clock.BATCHES, 4, 3)
    assert t.loader_wait_s == pytest.approx(timings["wait_s"]) and t.loader_wait_s > 0


def test_the_simulated_run_has_no_timings(tmp_path):
    report = run(script(tmp_path, "x = torch.ones(3, device=device)\n"))
    assert report.device == "" and report.timings is None
    assert "GPU timings" not in render_report(report, "text", str(tmp_path))


# -- the command line --------------------------------------------------------------------------------


def _run(*args):
    return CliRunner().invoke(main, ["run", *args])


def test_without_cuda_the_run_says_so_in_one_line_and_exits_2(tmp_path, monkeypatch):
    monkeypatch.setattr(cuda, "unavailable", lambda: "no GPU in this test")
    path = script(tmp_path, "x = 1\n")
    result = _run("--device", "cuda", str(path))
    assert result.exit_code == 2
    assert result.output == (
        "torchlint: error: no CUDA device: no GPU in this test; "
        "use the default simulated GPU (leave out `--device cuda`)\n"
    )


def test_on_this_machine_without_cuda(tmp_path):
    if cuda.unavailable() is None:
        pytest.skip("this machine has a CUDA device: the no-CUDA error cannot be seen here")
    result = _run("--device", "cuda", str(script(tmp_path, "x = 1\n")))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.startswith("torchlint: error: no CUDA device: ") and result.output.count("\n") == 1


def test_the_device_option(tmp_path, monkeypatch, cuda_syncs):
    path = script(tmp_path, "x = torch.ones(3, device=device)\nprint(x.sum().item())\n")
    assert _run("--device", "tpu", str(path)).exit_code == 2
    assert "on the simulated GPU" in _run("--device", "sim", str(path)).output
    assert "on the simulated GPU" in _run(str(path)).output  # the default
    monkeypatch.setattr(cuda, "device", FakeDevice)
    train = script(tmp_path, TRAIN, name="meta_train.py", header=False)
    result = _run("--device", "cuda", "--output-format", "json", str(train))
    assert result.exit_code == 1, result.output
    items = json.loads(result.stdout)
    assert {i["code"] for i in items} == {"TL104", "TL106", "TL401", "TL403"}
    assert "GPU timings (Fake GPU): " in result.stderr and "GPU timings" not in result.stdout
