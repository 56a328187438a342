"""bench/oracle.py: which files it runs, how a run's comparison is judged and
counted per rule, and (slow) two tiny scripts end to end."""

import json
import textwrap

import pytest

from bench import oracle


def _doc(status="ok", steps=5, error=None, exit_code=0, **kinds):
    doc = {
        "run": {"status": status, "steps": steps, "exit_code": exit_code, "error": error, "seconds": 1.0},
        "observed": kinds.pop("observed", []),
    }
    for kind in ("confirmed", "contradicted", "not_reached", "not_checked", "runtime_only"):
        doc[kind] = kinds.pop(kind, [])
    assert not kinds
    return doc


def _item(code, row, path="/p/a.py", **extra):
    return {"code": code, "path": path, "cell": None, "row": row, **extra}


def _obs(code, row, static, path="/p/a.py"):
    return {"code": code, "path": path, "cell": None, "row": row, "count": 4, "per_step": True, "static": static}


def test_a_failure_before_any_step_is_not_runnable_with_its_first_line():
    r = oracle.judge("/p/a.py", _doc("failed", 0, {"type": "FileNotFoundError", "message": "data.csv\nmore"}), 1, "")
    assert not r.runnable and r.reason == "FileNotFoundError: data.csv"
    usage = "usage: a.py [-h] --data DATA\na.py: error: the following arguments are required: --data\n"
    r = oracle.judge("/p/a.py", _doc("exited", 0, exit_code=2), 2, usage + "torchlint run: a.py exited with code 2\n")
    assert not r.runnable
    assert r.reason == "exited with code 2 before any step: a.py: error: the following arguments are required: --data"
    r = oracle.judge("/p/a.py", None, 1, "Traceback...\n  File x\nSegmentation fault\n")
    assert not r.runnable and r.reason == "Segmentation fault"


def test_a_run_with_steps_counts_even_when_it_raised_or_stopped():
    for status in ("failed", "stopped", "timed-out"):
        r = oracle.judge("/p/a.py", _doc(status, 3, {"type": "RuntimeError", "message": "late"}), 1, "")
        assert r.runnable and r.status == status and r.steps == 3
    assert oracle.judge("/p/a.py", _doc("timed-out", 0), 124, "").runnable  # slow to its first step, not broken
    assert oracle.judge("/p/a.py", _doc("ok", 0), 0, "").runnable  # ran to its end without a step


def test_tally_counts_per_rule_over_runnable_files_only():
    one = oracle.judge(
        "/p/a.py",
        _doc(
            confirmed=[_item("TL401", 10, reason="4 times")],
            contradicted=[_item("TL103", 7, reason="its line ran")],
            not_reached=[_item("TL401", 30, reason="its line never ran")],
            runtime_only=[_item("TL403", 12, count=4)],
            observed=[_obs("TL401", 10, True), _obs("TL401", 11, True), _obs("TL403", 12, False)],
        ),
        0,
        "",
    )
    two = oracle.judge(
        "/p/b.py", _doc(confirmed=[_item("TL401", 3, "/p/b.py")], observed=[_obs("TL401", 3, True, "/p/b.py")]), 0, ""
    )
    broken = oracle.judge(
        "/p/c.py",
        _doc("failed", 0, {"type": "OSError", "message": "x"}, confirmed=[_item("TL101", 1, "/p/c.py")]),
        1,
        "",
    )
    rules = oracle.tally([one, two, broken], root="/p")
    assert list(rules) == ["TL103", "TL401", "TL403"]
    assert [e["path"] for e in rules["TL401"]["confirmed"]] == ["a.py", "b.py"]
    assert rules["TL401"]["not_reached"] == [{"path": "a.py", "cell": None, "row": 30, "reason": "its line never ran"}]
    assert (rules["TL401"]["observed"], rules["TL401"]["also_static"]) == (3, 3)
    assert rules["TL403"]["runtime_only"] == [{"path": "a.py", "cell": None, "row": 12, "count": 4}]
    assert (rules["TL403"]["observed"], rules["TL403"]["also_static"]) == (1, 0)
    t = oracle.totals(rules)
    assert (t["confirmed"], t["contradicted"], t["not_reached"], t["runtime_only"]) == (2, 1, 1, 1)
    assert t["precision"] == 0.667 and t["also_static_share"] == 0.75
    table = oracle.markdown([one, two, broken], rules, root="/p")
    assert "2 of 3 files runnable." in table
    assert "| TL401 | 2 | 0 | 1 | 1.00 | 3 | 3 | 0 | 1.00 |" in table
    assert "| TL103 | 0 | 1 | 0 | 0.00 | 0 | 0 | 0 | n/a |" in table
    assert "| **all** | 2 | 1 | 1 | 0.67 | 4 | 3 | 1 | **0.75** |" in table
    assert "Not runnable: `c.py` (OSError: x)." in table
    doc = oracle.report([one, two, broken], root="/p")
    assert doc["files"][2] == {"path": "c.py", "runnable": False, "reason": "OSError: x", "steps": 0, "seconds": 1.0}
    assert doc["totals"] == t


def test_candidates_are_scripts_and_notebooks(tmp_path):
    (tmp_path / "lib.py").write_text('"""Docs."""\nimport torch\nX = 1\n\n\ndef f():\n    return X\n')
    (tmp_path / "main_guard.py").write_text("def main():\n    pass\n\n\nif __name__ == '__main__':\n    main()\n")
    (tmp_path / "top.py").write_text("import torch\nprint(torch.ones(1))\n")
    (tmp_path / "broken.py").write_text("def (:\n")
    (tmp_path / "nb.ipynb").write_text("{}")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "hidden.py").write_text("print(1)\n")
    names = [p.name for p in oracle.candidates([tmp_path, tmp_path / "top.py"])]
    assert names == ["main_guard.py", "nb.ipynb", "top.py"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("print(1)\n")
    (other / "b.py").write_text("print(2)\n")
    names = [p.name for p in oracle.candidates([other, tmp_path / "top.py", tmp_path / "main_guard.py"])]
    assert names == ["a.py", "top.py", "main_guard.py", "b.py"]  # in turn from each path given


def test_a_script_importing_a_module_not_installed_nor_beside_it_is_not_run(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "utils").mkdir()
    (repo / "models.py").write_text("")
    script = repo / "scripts" / "train.py"
    script.write_text("import os, torch\nfrom utils.data import load\nimport models\nprint(1)\n")
    assert oracle.missing_module(script, []) is None  # `utils` and `models` are in a folder above it
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "oracle_aside_mod.py").write_text("")
    script.write_text("import oracle_aside_mod\n")
    assert oracle.missing_module(script, []) == "oracle_aside_mod"
    assert oracle.missing_module(script, [elsewhere]) is None  # a folder given
    script.write_text("try:\n    import nosuchmodule_x\nexcept ImportError:\n    pass\nimport nosuchmodule_y.sub\n")
    assert oracle.missing_module(script, [repo]) == "nosuchmodule_y"
    results = oracle.run_all([script], timeout=1, steps=1, jobs=1, budget=None, roots=[repo])
    assert [(r.runnable, r.reason) for r in results] == [
        (False, "ModuleNotFoundError: No module named 'nosuchmodule_y' (not run)")
    ]


RUNS = """
import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
model = nn.Linear(4, 1).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(6):
    loss = model(torch.randn(8, 4, device=device)).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(loss.item())
"""

NEEDS_DATA = """
import torch

weights = torch.load("weights.pt")
print(sorted(weights))
"""


@pytest.mark.slow
def test_two_scripts_end_to_end(tmp_path, capsys):
    (tmp_path / "runs.py").write_text(textwrap.dedent(RUNS))
    (tmp_path / "needs_data.py").write_text(textwrap.dedent(NEEDS_DATA))
    out = tmp_path / "out"
    assert (
        oracle.main([str(tmp_path), "--steps", "4", "--timeout", "60", "--root", str(tmp_path), "--out", str(out)]) == 0
    )
    doc = json.loads((out / "oracle.json").read_text())
    files = {f["path"]: f for f in doc["files"]}
    assert files["runs.py"]["runnable"] and files["runs.py"]["steps"] == 4
    assert not files["needs_data.py"]["runnable"]
    assert files["needs_data.py"]["reason"].startswith("FileNotFoundError:")
    read_line = (tmp_path / "runs.py").read_text().splitlines().index("    print(loss.item())") + 1
    assert doc["rules"]["TL401"]["confirmed"] == [
        {
            "path": "runs.py",
            "cell": None,
            "row": read_line,
            "reason": "3 times, per step: 3 of 4 optimizer steps",
        }  # --steps ends it at the 4th opt.step()
    ]
    assert (doc["totals"]["observed"], doc["totals"]["also_static_share"]) == (1, 1.0)
    assert (out / "oracle.md").read_text() in capsys.readouterr().out
