"""bench/fix_audit.py: the verdicts of runs before and after a fix, the
judging sheet of a seeded sample of edit groups and its tally, on a small
corpus of our own."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from bench import fix_audit
from bench.fix_audit import Options, compare, line_map, tally

from helpers import code, notebook


def _script(status="ok", stdout="", error=None):
    return {"kind": "script", "status": status, "stdout": stdout, "error": error}


def _error(kind, message, cell=None):
    return {"type": kind, "message": message, "cell": cell}


def test_compare_tells_wrong_edits_from_code_that_cannot_run_here():
    ok, out = _script(stdout="1\n"), _script(stdout="2\n")
    missing = _script("error", error=_error("FileNotFoundError", "data.csv"))
    assert compare(ok, ok, True)[0] == "same"
    assert compare(ok, out, True)[0] == "output changed"
    assert compare(ok, out, False)[0] == "same"  # the accelerator's numbers mean nothing
    assert compare(ok, missing, True)[0] == "new crash"
    assert compare(missing, missing, True)[0] == "not runnable"
    assert compare(missing, _script("error", error=_error("NameError", "os")), True)[0] == "failure changed"
    assert compare(missing, ok, True)[0] == "fixed a failure"
    assert compare(_script("timeout"), missing, True)[0] == "not runnable"
    assert compare(ok, _script("timeout"), True)[0] == "new timeout"
    cells = {"kind": "notebook", "status": "error", "stdout": ""}
    early = dict(cells, error=_error("RuntimeError", "device", 3))
    late = dict(cells, error=_error("FileNotFoundError", "x", 5))
    assert compare(early, late, True)[0] == "not runnable"  # the fixed notebook gets further
    assert compare(late, early, True)[0] == "fails earlier"
    assert compare(early, dict(cells, error=_error("RuntimeError", "other", 3)), True)[0] == "failure changed"
    # Scripts: where they failed, through the fixed file's line numbers.
    at = lambda line: _script("error", error=dict(_error("RuntimeError", f"at {line}"), line=line))  # noqa: E731
    shifted = line_map("a\nb\nc\nd\n", "a\nX\nb\nc\nd\n")  # a line inserted after the first
    assert shifted(3) == 4
    assert compare(at(3), at(2), True, shifted)[0] == "fails earlier"
    assert compare(at(3), at(5), True, shifted)[0] == "not runnable"  # gets further
    assert compare(at(3), at(4), True, shifted)[0] == "failure changed"  # the same line, another error
    assert compare(at(3), at(2), True)[0] == "failure changed"  # without a map: for a person to read


def test_tally_counts_verdicts_by_rule_and_checks_the_bar(tmp_path):
    groups = [{"id": f"G{i:02d}", "rule": rule} for i, rule in enumerate(["TL303"] * 9 + ["TL401"] * 2, 1)]
    (tmp_path / "groups.jsonl").write_text("".join(json.dumps(g) + "\n" for g in groups))
    verdicts = [{"id": g["id"], "verdict": "correct", "reason": ""} for g in groups]
    verdicts[-1]["verdict"] = "no-benefit"
    (tmp_path / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts))
    summary, problems = tally(tmp_path)
    assert problems == []
    assert summary["rules"]["TL401"] == {"correct": 1, "no-benefit": 1, "wrong": 0}
    assert summary["judged"] == 11 and summary["meets_bar"]  # 1 of 11 is under 10%
    verdicts[0]["verdict"] = "no-benefit"
    (tmp_path / "verdicts.jsonl").write_text("".join(json.dumps(v) + "\n" for v in verdicts[:-2] + verdicts[-1:]))
    summary, problems = tally(tmp_path)
    assert not summary["meets_bar"] and problems == ["G10 is not judged"]


TRAIN = (
    "import torch\n"
    "from torch import nn\n"
    "from torch.utils.data import DataLoader, TensorDataset\n"
    "torch.manual_seed(0)\n"
    'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    "model = nn.Linear(3, 1).to(device)\n"
    "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
    "loader = DataLoader(TensorDataset(torch.randn(16, 3), torch.randn(16, 1)), batch_size=4)\n"
    "for x, y in loader:\n"
    "    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n"
    "    loss = nn.functional.mse_loss(model(x), y)\n"
    "    opt.zero_grad()\n"
    "    loss.backward()\n"
    "    opt.step()\n"
    "x = torch.ones(2, 3)\n"
    "x.to(device)\n"
    "print(model(x).shape)\n"
)


@pytest.mark.slow
def test_audit_runs_the_changed_files_and_writes_a_judging_sheet(tmp_path):
    repo = tmp_path / "corpus" / "someone__demo"
    repo.mkdir(parents=True)
    (repo / "train.py").write_text(TRAIN)
    (repo / "nb.ipynb").write_bytes(notebook(code(TRAIN.replace("x.to(device)\n", "")), code("model(x).shape")))
    (repo / "README.md").write_text("demo\n")
    cmd = f"{shlex.quote(sys.executable)} -m torchlint"
    opts = Options(run=True, run_timeout=300, run_jobs=2, groups=3, seed=5, sheet=tmp_path / "sheet", jobs=1)
    report = fix_audit.audit(tmp_path / "corpus", cmd, opts)
    assert report["repos"] == ["someone__demo"]
    assert report["files_changed"] == 2 and not fix_audit.failed(report)
    runs = report["runs"]
    assert runs["files"] == 2 and runs["wrong"] == [] and runs["accelerator_new_crashes"] == 0
    train = next(f for f in runs["per_file"] if f["path"].endswith("train.py"))
    # The discarded move crashed on the (simulated) GPU; the fix mends it, and the CPU run is the same.
    assert train["accelerator"]["verdict"] == "fixed a failure" and train["cpu"]["verdict"] == "same"
    sheet = tmp_path / "sheet"
    groups = [json.loads(x) for x in (sheet / "groups.jsonl").read_text().splitlines()]
    assert len(groups) == 3 and [g["id"] for g in groups] == ["G01", "G02", "G03"]
    assert (sheet / "verdicts.jsonl").read_text() == ""
    text = (sheet / "sheet.md").read_text()
    assert "## G01 " in text and "```diff\n--- someone__demo/" in text
    nb_groups = [g for g in groups if g["cell"] is not None]
    for g in nb_groups:  # a notebook's edit group is a diff of its cell's source
        assert g["diff"].startswith(f"--- someone__demo/nb.ipynb:cell {g['cell']}\n")
    # The same draw again: the sample is seeded.
    again = fix_audit.draw_groups(*_recorded(tmp_path, cmd), seed=5, count=3)
    assert [(rel, fx["rule"], fx["line"]) for rel, fx in again] == [(g["path"], g["rule"], g["line"]) for g in groups]


def _recorded(tmp_path: Path, cmd: str):
    root = tmp_path / "corpus"
    original = fix_audit.snapshot(root)
    found = fix_audit.lint(cmd, root)
    fixable = sorted({fix_audit.rel_of(root, f["filename"]) for f in found if f.get("fix")})
    recorded = {rel: fix_audit.instrumented_fix((rel, str(root / rel), original[rel], True)) for rel in fixable}
    return recorded, original


@pytest.mark.slow
def test_a_run_that_changes_is_a_wrong_edit(tmp_path):
    before, after = tmp_path / "before" / "r", tmp_path / "after" / "r"
    before.mkdir(parents=True)
    after.mkdir(parents=True)
    src = TRAIN.replace("x.to(device)\n", "").replace(
        "model = nn.Linear(3, 1).to(device)\n", "model = nn.Linear(3, 1)\n"
    )
    src = src.replace("    x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)\n", "")
    (before / "a.py").write_text(src)
    (after / "a.py").write_text(src.replace("x = torch.ones(2, 3)\n", "x = torch.ones(2, 3).to(device)\n"))
    recorded = {"r/a.py": {"fixes": [{"rule": "TL105"}]}}
    runs = fix_audit.run_changed(
        tmp_path / "before", tmp_path / "after", ["r/a.py"], recorded, {"r/a.py": src.encode()}, Options(run_jobs=2)
    )
    (wrong,) = runs["wrong"]
    assert wrong["mode"] == "accelerator" and wrong["verdict"] == "new crash" and "device" in wrong["detail"]
    assert runs["accelerator_new_crashes"] == 1 and runs["wrong_by_rule"] == {"TL105": 1}
    assert runs["cpu"] == {"same": 1}
