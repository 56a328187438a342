"""`torchlint run` on the command line: output formats, the runtime object,
--compare, exit codes, Ctrl-C, and torch kept out of `check`."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from torchlint.doors.cli import main

from runtime_scripts import line_of, script

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LEAKY = """
model = Net().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(32, 10), torch.randint(0, 3, (32,))), batch_size=8, pin_memory=True)
for epoch in range(2):
    for x, y in loader:
        x = x.to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if epoch > 5:
            print(loss.item())
"""


def _run(*args):
    return CliRunner().invoke(main, ["run", *args])


def test_json_has_check_schema_and_a_runtime_object(tmp_path):
    path = script(tmp_path, LEAKY)
    result = _run("--output-format", "json", str(path))
    assert result.exit_code == 1, result.output
    start = result.stdout.index("[\n")
    items = json.loads(result.stdout[start:])
    (item,) = items
    assert item["code"] == "TL103" and item["location"]["row"] == line_of(path, "cross_entropy")
    assert item["filename"] == str(path) and item["name"] == "batch-not-moved"
    assert item["runtime"] == {
        "count": 8,
        "steps_seen": 8,
        "steps": 8,
        "clock": "optimizer steps",
        "per_step": True,
        "rate": 1.0,
        "crash": True,
        "related": [],
        "timings": {},
    }
    assert set(item) >= {"cell", "end_location", "fix", "message", "noqa_row", "url"}


def test_sarif_carries_the_runtime_object(tmp_path):
    path = script(tmp_path, LEAKY)
    result = _run("--output-format", "sarif", "-o", str(tmp_path / "out.sarif"), str(path))
    assert result.exit_code == 1
    sarif = json.loads((tmp_path / "out.sarif").read_text())
    (res,) = sarif["runs"][0]["results"]
    assert res["ruleId"] == "TL103" and res["properties"]["runtime"]["count"] == 8


def test_text_report_and_compare(tmp_path):
    path = script(tmp_path, LEAKY)
    result = _run("--compare", str(path))
    assert result.exit_code == 1
    out = result.output
    assert "ran to its end after 8 optimizer steps on the simulated GPU" in out
    assert "TL103 a GPU run raises here" in out and "[8 times, every step: 8 of 8 optimizer steps]" in out
    confirmed = out[out.index("confirmed (") : out.index("contradicted (")]
    assert f"train.py:{line_of(path, 'cross_entropy')} TL103" in confirmed
    reached = out[out.index("not reached (") : out.index("runtime-only (")]
    assert f"train.py:{line_of(path, 'print(loss.item())')} TL401" in reached


def test_compare_output_writes_the_comparison_and_the_run_as_json(tmp_path):
    path = script(tmp_path, LEAKY)
    out = tmp_path / "compare.json"
    result = _run("--output-format", "json", "-o", str(tmp_path / "run.json"), "--compare-output", str(out), str(path))
    assert result.exit_code == 1, result.output
    doc = json.loads(out.read_text())
    assert doc["run"]["status"] == "ok" and doc["run"]["steps"] == 8 and doc["run"]["error"] is None
    assert doc["run"]["clock"] == "optimizer steps" and doc["run"]["device_used"] is True
    row = line_of(path, "cross_entropy")
    assert [(c["code"], c["row"]) for c in doc["confirmed"]] == [("TL103", row)]
    assert ("TL401", line_of(path, "print(loss.item())")) in [(c["code"], c["row"]) for c in doc["not_reached"]]
    assert doc["observed"] == [
        {"code": "TL103", "path": str(path), "cell": None, "row": row, "count": 8, "per_step": True, "static": True}
    ]
    assert doc["runtime_only"] == []
    assert '"confirmed"' not in result.stderr  # the comparison went to the file, not to stderr


def test_exit_codes(tmp_path):
    clean = script(tmp_path, "print(torch.ones(2, device=device).sum().item())\n", name="clean.py")
    assert _run(str(clean)).exit_code == 0
    leaky = script(tmp_path, LEAKY, name="leaky.py")
    assert _run(str(leaky)).exit_code == 1
    assert _run("--exit-zero", str(leaky)).exit_code == 0
    exits = script(tmp_path, "import sys\nsys.exit(3)\n", name="exits.py", header=False)
    assert _run(str(exits)).exit_code == 3
    raises = script(tmp_path, "raise RuntimeError('boom')\n", name="raises.py", header=False)
    result = _run(str(raises))
    assert result.exit_code == 1 and "The script raised RuntimeError" in result.output
    assert _run(str(tmp_path / "missing.py")).exit_code == 2
    assert _run().exit_code == 2


def test_script_arguments_follow_the_script(tmp_path):
    path = script(
        tmp_path,
        "import sys\nassert sys.argv[1:] == ['--steps', '2', '-m', 'x'], sys.argv\n",
        header=False,
    )
    assert _run("--steps", "3", str(path), "--steps", "2", "-m", "x").exit_code == 0


def test_dash_m(tmp_path, monkeypatch):
    (tmp_path / "job.py").write_text("import sys\nassert sys.argv[1:] == ['a', '--b'], sys.argv\n")
    monkeypatch.chdir(tmp_path)
    assert _run("-m", "job", "a", "--b").exit_code == 0


def test_importing_the_command_imports_no_torch():
    code = "import sys, torchlint.doors.cli, torchlint.doors.run_command, torchlint.runtime; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_check_imports_no_torch(tmp_path):
    path = script(tmp_path, LEAKY)
    code = textwrap.dedent(
        f"""
        import sys
        from torchlint.doors.cli import main
        try:
            main(["check", "--no-cache", {str(path)!r}])
        except SystemExit as exc:
            assert exc.code == 1, exc.code
        assert "torch" not in sys.modules
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


@pytest.mark.slow
def test_ctrl_c_ends_the_run_with_the_report_so_far(tmp_path):
    path = script(
        tmp_path,
        """
        import sys
        model = Net().to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        step = 0
        while True:
            loss = model(torch.randn(2, 10, device=device)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            print(loss.item())
            step += 1
            if step == 3:
                print("ready", file=sys.stderr, flush=True)
        """,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "torchlint", "run", "--output-format", "json", str(path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted (Ctrl-C)" in err
    items = json.loads(out[out.index("[\n") :])
    assert [i["code"] for i in items] == ["TL401"] and items[0]["runtime"]["count"] >= 3


def test_the_runtime_never_imports_a_door():
    """torchlint/runtime/ may use the library (api, findings, config, report,
    the rule catalog, the knowledge table), never the doors."""
    from test_architecture import _imports, _modules

    graph = _imports(_modules())
    doors = ("torchlint.server", "torchlint.doors")
    for name, imported in graph.items():
        if name == "torchlint.runtime" or name.startswith("torchlint.runtime."):
            assert not [m for m in imported if m.startswith(doors)], (name, sorted(imported))
