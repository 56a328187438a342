"""bench/rounds.py: how a first-sight round draws what its judges read."""

from __future__ import annotations

import json

from bench import rounds

TRAIN = "import torch\nfor x, y in loader:\n    x = x.to(device)\n"


def _repo(root, name, files):
    base = root / name.replace("/", "__")
    for rel, text in files.items():
        path = base / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_recall_candidates_are_files_with_torch_a_device_and_a_data_loop(tmp_path):
    notebook = {
        "cells": [
            {"cell_type": "code", "source": ["import torch\n", "for b in tqdm(train_loader):\n", "    b.cuda()\n"]}
        ]
    }
    _repo(
        tmp_path,
        "o/r",
        {
            "train.py": TRAIN,
            "nb.ipynb": json.dumps(notebook),
            "tests/test_train.py": TRAIN,  # a test
            "test_more.py": TRAIN,
            "docs/conf.py": TRAIN,
            "model.py": "import torch\nclass Net: pass\n",  # no data loop
            "cpu.py": "import torch\nfor x in loader:\n    print(x)\n",  # no device
            "big.py": TRAIN + "\n" * rounds.RECALL_MAX_LINES,
            ".hidden/train.py": TRAIN,
        },
    )
    assert rounds.recall_candidates(tmp_path / "o__r") == ["nb.ipynb", "train.py"]


def test_the_draw_is_seeded_and_takes_at_most_two_per_repository_of_a_group(tmp_path):
    _repo(tmp_path, "a/one", {f"t{i}.py": TRAIN for i in range(6)})
    _repo(tmp_path, "b/two", {f"t{i}.py": TRAIN for i in range(6)})
    groups = [["a/one"], ["a/one", "b/two"]]
    first = rounds.draw_recall_files(groups, 7, tmp_path, [5, 5])
    assert first == rounds.draw_recall_files(groups, 7, tmp_path, [5, 5])
    alone, shared = first
    assert len(alone) == 5 and {f["repo"] for f in alone} == {"a/one"}
    assert len(shared) == 4  # two from each repository, though five were asked for
    assert sorted(f["repo"] for f in shared) == ["a/one", "a/one", "b/two", "b/two"]
    assert rounds.draw_recall_files(groups, 8, tmp_path, [5, 5]) != first


def _judged_round(number, first_sight, verdicts, recall):
    meta = {
        "round": number,
        "first_sight": first_sight,
        "pool_rows": [number * 10, number * 10 + 9],
        "guide": "v2",
        "sampled": [{"id": v["id"], "rule": v["rule"]} for v in verdicts],
    }
    return rounds.Round(number, first_sight, meta, tuple(verdicts), recall)


def test_the_markdown_table_has_a_column_per_first_sight_round_and_totals():
    one = _judged_round(
        1,
        True,
        [
            {"id": "a", "rule": "TL401", "verdict": "tp", "fix": "correct"},
            {"id": "b", "rule": "TL401", "verdict": "fp", "fix": None},
            {"id": "c", "rule": "TL104", "verdict": "tp", "fix": "no-benefit"},
        ],
        {"files": [{}, {}], "instances": [{"found": True}, {"found": False}, {"found": True}]},
    )
    seen = _judged_round(2, False, [{"id": "d", "rule": "TL401", "verdict": "tp", "fix": None}], {})
    two = _judged_round(3, True, [{"id": "e", "rule": "TL201", "verdict": "fp", "fix": "wrong"}], {})
    lines = rounds.first_sight_markdown([one, seen, two]).splitlines()
    assert lines[0] == "| rule | round 1 (rows 10-19, guide v2) | round 3 (rows 30-39, guide v2) |"
    assert "| TL401 | 1/2 (0.50) | – |" in lines
    assert "| TL201 | – | 0/1 (0.00) |" in lines
    assert "| **all** | **2/3 (0.67)** | **0/1 (0.00)** |" in lines
    assert "| recall | 2/3 (0.67) in 2 files | – |" in lines
    assert lines[-1] == "| offered fixes | 1 correct, 1 no-benefit, 0 wrong | 0 correct, 0 no-benefit, 1 wrong |"
