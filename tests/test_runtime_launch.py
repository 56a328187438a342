"""Running scripts, modules and notebooks as Python would: argv, __main__,
sys.path, exit codes, failures, --steps and --timeout."""

import json
import os
import signal
import sys
import textwrap

from torchlint import runtime
from torchlint.runtime.observations import Clock, Status

from runtime_scripts import HEADER, line_of, only, reported, run, script

TRAIN = """
model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(STEPS):
    loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
"""


def test_argparse_arguments_argv_and_main(tmp_path):
    path = script(
        tmp_path,
        textwrap.dedent(
            """
            import argparse, sys
            parser = argparse.ArgumentParser()
            parser.add_argument("--steps", type=int, default=100)
            parser.add_argument("name")
            args = parser.parse_args()
            assert __name__ == "__main__" and sys.argv[0] == __file__
            assert sys.path[0] == __import__("os").path.dirname(__file__)
            STEPS = args.steps
            """
        )
        + TRAIN,
    )
    report = run(path, ["--steps", "3", "demo"])
    assert report.status is Status.OK and report.exit_code == 0, report.error
    assert report.steps == 3
    assert reported(report) == [("TL401", line_of(path, "print(loss.item())"), 3)]
    assert sys.argv[0] != str(path)  # restored


def test_sibling_modules_are_the_users_and_forgotten_afterwards(tmp_path):
    (tmp_path / "helpers_mod.py").write_text("def read(t):\n    return t.item()\n")
    path = script(
        tmp_path, "from helpers_mod import read\nSTEPS = 3\n" + TRAIN.replace("print(loss.item())", "read(loss)")
    )
    report = run(path)
    o = only(report, "TL401")
    assert (o.site.path, o.site.line, o.count) == (str(tmp_path / "helpers_mod.py"), 2, 3)
    assert "helpers_mod" not in sys.modules
    assert str(tmp_path / "helpers_mod.py") in report.files


def test_a_module_with_dash_m(tmp_path, monkeypatch):
    package = tmp_path / "proj"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "train.py").write_text(HEADER + "import sys\nSTEPS = int(sys.argv[1])\n" + TRAIN)
    monkeypatch.chdir(tmp_path)
    report = runtime.run_module("proj.train", ["2"])
    assert report.status is Status.OK, report.error
    assert report.kind == "module" and report.steps == 2
    assert [(o.code, o.site.path) for o in report.findings] == [("TL401", str(package / "train.py"))]
    assert "proj.train" not in sys.modules and "proj" not in sys.modules


def _notebook(path, cells):
    nb = {
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": src, "outputs": [], "execution_count": None}
            if kind == "code"
            else {"cell_type": kind, "metadata": {}, "source": src}
            for kind, src in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_a_notebook_cell_and_line(tmp_path):
    nb = _notebook(
        tmp_path / "train.ipynb",
        [
            ("markdown", "# Training"),
            ("code", HEADER),
            ("code", "%matplotlib inline\n!pip install nothing\nSTEPS = 3"),
            ("code", "%%bash\necho not python"),
            ("code", "%%time\n" + TRAIN.lstrip("\n")),  # runs its body, at its own lines
        ],
    )
    report = runtime.run_script(str(nb))
    assert report.status is Status.OK and report.kind == "notebook", report.error
    o = only(report, "TL401")
    assert (o.site.path, o.site.cell, o.site.line, o.count) == (str(nb), 5, 9, 3)
    assert o.site.where() == f"{nb}:cell 5:9"


def test_a_notebook_without_ipython(tmp_path, monkeypatch):
    from torchlint.runtime import launch

    monkeypatch.setattr(launch, "_shell", lambda: None)
    nb = _notebook(
        tmp_path / "nb.ipynb", [("code", HEADER + "STEPS = 2\n"), ("code", "%time x = 1\n" + TRAIN.lstrip("\n"))]
    )
    report = runtime.run_script(str(nb))
    assert report.status is Status.OK, report.error
    assert [(o.site.cell, o.site.line, o.count) for o in report.findings] == [(2, 9, 2)]


def test_a_script_that_raises(tmp_path):
    path = script(
        tmp_path,
        """
        def step(i):
            if i == 2:
                raise ValueError("bad batch")

        STEPS = 5
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(STEPS):
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
            step(i)
        """,
    )
    report = run(path)
    assert report.status is Status.FAILED and report.exit_code == 1
    assert report.error.type == "ValueError" and report.error.site.line == line_of(path, "raise ValueError")
    assert "bad batch" in report.error.traceback and "step(i)" in report.error.traceback
    assert reported(report) == [("TL401", line_of(path, "print(loss.item())"), 3)]


def test_the_process_is_left_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = script(
        tmp_path,
        """
        import os, signal, sys
        os.makedirs("sub", exist_ok=True)
        os.chdir("sub")
        os.environ["TORCHLINT_TEST_VAR"] = "1"
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stdout = open(os.devnull, "w")
        """,
        header=False,
    )
    handler = signal.getsignal(signal.SIGINT)
    stdout = sys.stdout
    assert run(path).status is Status.OK
    assert os.getcwd() == str(tmp_path) and "TORCHLINT_TEST_VAR" not in os.environ
    assert signal.getsignal(signal.SIGINT) is handler and sys.stdout is stdout


def test_sys_exit_codes(tmp_path):
    assert run(script(tmp_path, "import sys\nsys.exit(3)\n", header=False)).exit_code == 3
    report = run(script(tmp_path, "import sys\nsys.exit(0)\n", header=False))
    assert (report.status, report.exit_code) == (Status.OK, 0)
    report = run(script(tmp_path, "raise SystemExit('usage: no')\n", header=False))
    assert (report.status, report.exit_code) == (Status.EXITED, 1)


def test_steps_stops_cleanly(tmp_path):
    path = script(tmp_path, "STEPS = 1000\n" + TRAIN)
    report = run(path, steps=4)
    assert report.status is Status.STOPPED and report.exit_code == 0
    assert report.steps == 4 and report.clock is Clock.OPTIMIZER
    assert reported(report) == [("TL401", line_of(path, "print(loss.item())"), 3)]  # the 4th step stopped at its step()


def test_steps_without_an_optimizer_counts_batches(tmp_path):
    path = script(
        tmp_path,
        """
        model = Net().to(device).eval()
        seen = 0
        with torch.no_grad():
            for epoch in range(100):
                for x, y in DataLoader(TensorDataset(torch.randn(64, 10), torch.zeros(64)), batch_size=4):
                    model(x.to(device))
                    seen += 1
        """,
    )
    report = run(path, steps=5)
    assert report.status is Status.STOPPED and report.steps == 5 and report.clock is Clock.BATCHES


def test_timeout(tmp_path):
    path = script(tmp_path, "import time\nwhile True:\n    time.sleep(0.01)\n", header=False)
    report = run(path, timeout=0.3)
    assert report.status is Status.TIMED_OUT and report.exit_code == 124


def test_network_is_off(tmp_path):
    path = script(
        tmp_path,
        """
        import socket
        try:
            socket.create_connection(("example.com", 80), timeout=1)
        except OSError as exc:
            print("refused:", exc)
        else:
            raise SystemExit(5)
        """,
        header=False,
    )
    assert run(path).exit_code == 0


def test_fake_image_sets():
    from torchlint.runtime.sandbox import IMAGE_SETS, Sandbox, fake_image_set

    mnist = fake_image_set("MNIST", *IMAGE_SETS["MNIST"])(root="nowhere", train=True, download=True)
    image, label = mnist[3]
    assert len(mnist) == 64 and image.size == (28, 28) and 0 <= label < 10 and mnist.data.shape == (64, 28, 28)
    cifar = fake_image_set("CIFAR10", *IMAGE_SETS["CIFAR10"])(train=False)
    assert len(cifar) == 32 and cifar.data.shape == (32, 32, 32, 3) and len(cifar.targets) == 32
    try:
        import torchvision  # noqa: F401
    except ImportError:
        assert Sandbox().fake_data() is False  # nothing to replace
