"""The simulated accelerator: what reaches the torch function mode in this
torch, how marks move with values, and what the script sees of the device."""

import copy

import pytest

from runtime_scripts import reported, run, script

torch = pytest.importorskip("torch")

from torch.overrides import TorchFunctionMode  # noqa: E402

from torchlint.runtime.observations import Status  # noqa: E402


def test_tensor_methods_and_dunders_reach_a_torch_function_mode():
    """What mode.py relies on: every host read and property reaches the mode."""
    seen = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    x, s = torch.ones(3), torch.tensor(2.0)
    T = torch.Tensor
    checks = [
        (lambda: s.item(), T.item),
        (lambda: x.tolist(), T.tolist),
        (lambda: x.numpy(), T.numpy),
        (lambda: bool(s), T.__bool__),
        (lambda: float(s), T.__float__),
        (lambda: int(s), T.__int__),
        (lambda: [1, 2, 3][torch.tensor(1)], T.__index__),
        (lambda: f"{s:.2f}", T.__format__),
        (lambda: repr(x), T.__repr__),
        (lambda: x.device, T.device.__get__),
        (lambda: x.grad, T.grad.__get__),
        (lambda: x.cpu(), T.cpu),
        (lambda: x.to(torch.float64), T.to),
        (lambda: torch.zeros(2), torch.zeros),
    ]
    with Mode():
        for call, func in checks:
            seen.clear()
            call()
            assert func in seen, func


def _marked(t):
    from torchlint.runtime.accelerator import marked

    return marked(t)


def test_values_are_real_and_moves_copy(tmp_path):
    path = script(
        tmp_path,
        """
        import copy, json, sys
        x = torch.arange(4.0, requires_grad=True)
        y = x.to("cuda")
        out = {
            "available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0), "memory": torch.cuda.memory_allocated(),
            "x_device": str(x.device), "y_device": str(y.device), "y_is_cuda": y.is_cuda,
            "same": y is x, "y_again": y.to(device) is y, "values": y.tolist(),
            "sum": (y * 2).sum().item(), "leaf": y.is_leaf,
        }
        y.sum().backward()
        out["grad"] = x.grad.tolist()
        z = torch.zeros(2, device="cuda")
        out["z"] = str(z.device)
        model = Net()
        w = model.fc.weight
        moved = model.to(device)
        out["module_same"] = moved is model and model.fc.weight is w
        out["param_device"] = str(model.fc.weight.device)
        twin = copy.deepcopy(model)
        out["twin_device"] = str(twin.fc.weight.device)
        out["back"] = str(model.cpu().fc.weight.device)
        manual = nn.Linear(2, 2)
        for param in manual.parameters():
            param.data = param.data.to(device)
        out["manual"] = str(manual(torch.ones(1, 2, device=device)).device)
        out["host"] = str(y.cpu().device)
        torch.save({"w": z}, "ckpt.pt")
        out["loaded"] = str(torch.load("ckpt.pt", map_location=device)["w"].device)
        out["loaded_cpu"] = str(torch.load("ckpt.pt", map_location="cpu")["w"].device)
        with torch.autocast("cuda", dtype=torch.float16):
            out["autocast"] = str((z @ z).dtype)
        scaler = torch.amp.GradScaler("cuda")
        out["scaled"] = scaler.scale(torch.ones((), device=device)).item()
        json.dump(out, open("out.json", "w"))
        """,
    )
    import json
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        report = run(path)
    finally:
        os.chdir(cwd)
    assert report.status is Status.OK, report.error
    assert reported(report) == []  # nothing mixed devices; the reads happen once
    out = json.loads((tmp_path / "out.json").read_text())
    assert out == {
        "available": True,
        "count": 1,
        "name": "Simulated GPU (torchlint run)",
        "memory": 0,
        "x_device": "cpu",
        "y_device": "cuda:0",
        "y_is_cuda": True,
        "same": False,
        "y_again": True,
        "values": [0.0, 1.0, 2.0, 3.0],
        "sum": 12.0,
        "leaf": False,
        "grad": [1.0, 1.0, 1.0, 1.0],
        "z": "cuda:0",
        "module_same": True,
        "param_device": "cuda:0",
        "twin_device": "cuda:0",
        "back": "cpu",
        "manual": "cuda:0",
        "host": "cpu",
        "loaded": "cuda:0",
        "loaded_cpu": "cpu",
        "autocast": "torch.float32",
        "scaled": 1.0,
    }
    # Nothing of the run is left on torch: the next code sees the real machine.
    assert not torch.cuda.is_available()
    assert torch.nn.Module.to.__module__ == "torch.nn.modules.module"
    assert torch._C._len_torch_function_stack() == 0


def test_a_saved_tensor_carries_no_mark(tmp_path):
    path = script(
        tmp_path,
        """
        z = torch.ones(2, device="cuda")
        torch.save(z, __file__ + ".pt")
        """,
    )
    assert run(path).status is Status.OK
    loaded = torch.load(str(path) + ".pt")
    assert loaded.__dict__ == {}


def test_marks_in_the_process_after_a_run():
    t = torch.ones(2)
    assert not _marked(t) and not _marked(copy.deepcopy(t))


def test_numpy_of_a_device_tensor_is_reported_as_a_crash_and_the_run_goes_on(tmp_path):
    path = script(
        tmp_path,
        """
        x = torch.ones(3, device=device)
        a = x.numpy()
        print(a.sum())
        """,
    )
    report = run(path)
    assert report.status is Status.OK
    assert [(c, n) for c, _, n in reported(report)] == [("TL401", 1)]
    assert report.findings[0].crash


def test_legacy_cuda_types_and_type_queries(tmp_path):
    path = script(
        tmp_path,
        """
        import json
        x = torch.cuda.FloatTensor([1.0, 2.0])
        y = torch.ones(2).type("torch.cuda.FloatTensor")
        z = torch.ones(2, dtype=torch.int64).type(torch.cuda.FloatTensor)
        kinds = [isinstance(x, torch.cuda.FloatTensor), isinstance(torch.ones(1), torch.cuda.FloatTensor), z.dtype == torch.float32]
        json.dump([str(x.device), x.type(), str(y.device), x.get_device(), torch.ones(1).get_device(), str(z.device), kinds], open(__file__ + ".json", "w"))
        """,
    )
    assert run(path).status is Status.OK
    import json

    assert json.loads((tmp_path / "train.py.json").read_text()) == [
        "cuda:0",
        "torch.cuda.FloatTensor",
        "cuda:0",
        0,
        -1,
        "cuda:0",
        [True, False, True],
    ]


def test_default_device_and_generators(tmp_path):
    path = script(
        tmp_path,
        """
        import json
        out = []
        with torch.device("cuda"):
            out.append(str(nn.Linear(3, 2).weight.device))
        out.append(str(torch.zeros(1).device))
        torch.set_default_device("cuda")
        out.append(str(torch.randn(2).device))
        g = torch.Generator(device="cuda")
        g.manual_seed(0)
        out.append(str(torch.randn(2, generator=g).device))
        out.append(isinstance(torch.default_generator, torch.Generator))
        json.dump(out, open(__file__ + ".json", "w"))
        """,
    )
    report = run(path)
    assert report.status is Status.OK, report.error
    import json

    assert json.loads((tmp_path / "train.py.json").read_text()) == ["cuda:0", "cpu", "cuda:0", "cuda:0", True]
    assert str(torch.zeros(1).device) == "cpu" and torch._C._len_torch_function_stack() == 0
