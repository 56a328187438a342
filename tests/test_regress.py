"""bench/regress.py: a judged row is reported when its rule is found in its statement."""

import json
from pathlib import Path

from bench import regress
from bench.regress import FALSE, INSTANCE, TRUE, Row, Tally


def _row(root: Path, path: str, line: int, truth: str, rule: str = "TL401", cell=None, **kw) -> Row:
    return Row(root, path, line, cell, rule, truth, "why", **kw)


def test_a_row_counts_a_finding_anywhere_in_its_statement(tmp_path):
    (tmp_path / "train.py").write_text("x = f(\n    a,\n    b.item(),\n)\ny = 1\n")
    found = {(tmp_path / "train.py").resolve(): [("TL401", None, 3)]}
    assert regress.reported(_row(tmp_path, "train.py", 1, TRUE), found)
    assert not regress.reported(_row(tmp_path, "train.py", 5, TRUE), found)
    assert not regress.reported(_row(tmp_path, "train.py", 1, TRUE, rule="TL104"), found)


def test_notebook_rows_match_their_cell_within_two_rows(tmp_path):
    nb = {"cells": [{"cell_type": "code", "source": "a = 1\n"}, {"cell_type": "code", "source": "b\nc\nd\ne\n"}]}
    (tmp_path / "nb.ipynb").write_text(json.dumps(nb))
    found = {(tmp_path / "nb.ipynb").resolve(): [("TL201", 2, 4)]}
    assert regress.reported(_row(tmp_path, "nb.ipynb", 2, TRUE, rule="TL201", cell=2), found)
    assert not regress.reported(_row(tmp_path, "nb.ipynb", 1, TRUE, rule="TL201", cell=2), found)
    assert not regress.reported(_row(tmp_path, "nb.ipynb", 4, TRUE, rule="TL201", cell=1), found)


def test_recall_rows_of_a_round_count_a_finding_where_the_loop_calls_the_helper(tmp_path):
    src = "def step(t):\n    return t.item()\n\nfor t in ts:\n    step(t)\n"
    (tmp_path / "a.py").write_text(src)
    found = {(tmp_path / "a.py").resolve(): [("TL401", None, 5)]}
    assert regress.reported(_row(tmp_path, "a.py", 2, INSTANCE, helper_calls=True), found)
    assert not regress.reported(_row(tmp_path, "a.py", 2, INSTANCE), found)


def test_the_tally_separates_false_true_and_instances():
    t = Tally()
    root = Path(".")
    t.add(_row(root, "a.py", 1, FALSE), True)
    t.add(_row(root, "a.py", 2, FALSE), False)
    t.add(_row(root, "a.py", 3, TRUE, changed=True), True)
    t.add(_row(root, "a.py", 4, INSTANCE, missed_then=True), True)
    t.add(_row(root, "a.py", 5, INSTANCE), False)
    assert (t.false_kept, t.false_all, t.true_kept, t.true_all) == (1, 2, 1, 1)
    assert (t.found, t.instances, t.found_of_missed, t.missed_then) == (1, 2, 1, 1)
    assert (t.changed, t.changed_kept) == (1, 1)
    assert "false-kept     1/2" in regress.line_of("x", t)


def test_a_round_uses_its_v3_verdicts(tmp_path):
    folder = tmp_path / "round-9"
    folder.mkdir()
    pool = tmp_path / "pool"
    (pool / "o__r").mkdir(parents=True)
    (pool / "o__r" / "a.py").write_text("a\nb\n")
    sampled = [{"id": "R9-001", "rule": "TL104", "repo": "o/r", "path": "a.py", "line": 1, "cell": None}]
    (folder / "round.json").write_text(json.dumps({"sampled": sampled}))
    (folder / "verdicts.jsonl").write_text(json.dumps({"id": "R9-001", "verdict": "tp", "reason": "r"}) + "\n")
    inst = {"repo": "o/r", "path": "a.py", "line": 2, "cell": None, "rule": "TL401", "why": "w", "found": False}
    (folder / "recall.json").write_text(json.dumps({"instances": [inst]}))
    relabels = [
        {"kind": "verdict", "id": "R9-001", "v3": "fp", "reason": "once, in __init__"},
        {"kind": "recall", "repo": "o/r", "path": "a.py", "line": 2, "rule": "TL401", "v3": "fp", "reason": "once"},
    ]
    (folder / "v3.jsonl").write_text("".join(json.dumps(r) + "\n" for r in relabels))
    judged = regress.round_set(folder, pool)
    assert judged is not None
    assert [(r.truth, r.changed) for r in judged.rows] == [(FALSE, True)]  # the instance is no instance under v3
