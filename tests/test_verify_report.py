"""Report formats: JSON keys, Markdown table, PNG file."""

import json

import pytest

from torchlint.verify import report as R
from torchlint.verify import verdict as V


def rule(code, metric, verdict, bad=None, fixed=None, change=None, direction="up", threshold=0.1, repeats=5):
    return {
        "repeats": repeats,
        "rule": code,
        "name": "x",
        "fixture": f"fixtures/{code}-x",
        "summary": "s",
        "metric": metric,
        "direction": direction,
        "threshold": threshold,
        "threshold_unit": "points",
        "bad": bad,
        "fixed": fixed,
        "change": change,
        "effect": change,
        "noise": 0.0,
        "mechanism": {"ok": True, "reason": ""},
        "verdict": verdict,
        "reason": "because | reasons",
        "metrics": {},
        "errors": [],
    }


def summ(median, spread=0.0, n=5):
    return V.Summary(median, spread, median, median, n, [median] * n).to_dict()


def sample_report():
    rules = [
        rule("TL104", "h2d_copies", "pass", summ(100), summ(2), -0.98, "down", 0.2),
        rule("TL302", "busy_fraction", "inconclusive", summ(0.3, 0.2), summ(0.45, 0.1), 0.15),
        rule("TL201", "peak_mem_bytes", "fail", summ(2**30), summ(2**30), 0.0, "down", 0.2),
        rule("TL401", "sync_count", "skipped"),
    ]
    return R.build(rules, mode="gpu", repeats=5, environment={"torch": "2.13.0", "cuda": "12.8", "device": "H100"})


def test_json_report_keys(tmp_path):
    rep = sample_report()
    path = tmp_path / "out" / "report.json"
    R.write_json(rep, path)
    data = json.loads(path.read_text())
    for key in (
        "schema_version",
        "tool",
        "torchlint_version",
        "mode",
        "repeats",
        "skipped_reason",
        "environment",
        "summary",
        "rules",
        "complete",
        "rules_not_run",
    ):
        assert key in data
    assert data["schema_version"] == 2 and data["complete"] is True
    assert data["summary"] == {"fail": 1, "inconclusive": 1, "pass": 1, "skipped": 1}
    first = data["rules"][0]
    for key in (
        "rule",
        "name",
        "fixture",
        "summary",
        "metric",
        "direction",
        "threshold",
        "bad",
        "fixed",
        "change",
        "verdict",
        "reason",
        "mechanism",
        "metrics",
    ):
        assert key in first
    assert first["bad"]["median"] == 100 and first["bad"]["n"] == 5


def test_markdown_table():
    md = R.to_markdown(sample_report())
    lines = md.splitlines()
    header = lines.index("| Rule | Metric | Bad | Fixed | Change | Threshold | Verdict | Repeats |")
    assert lines[header + 1] == "|---|---|---|---|---|---|---|---|"
    body = lines[header + 2 : header + 6]
    assert body[0] == "| TL104 | h2d_copies | 100 | 2 | -98.0% | down >= 20% | PASS | 5 |"
    assert body[1] == (
        "| TL302 | busy_fraction | 30.0% ± 20.0% | 45.0% ± 10.0% | +15.0 pts | up >= 10 pts | INCONCLUSIVE | 5 |"
    )
    assert body[2].startswith("| TL201 | peak_mem_bytes | 1024.0 MiB | 1024.0 MiB | +0.0% |")
    assert body[3] == "| TL401 | sync_count | - | - | n/a | up >= 10% | SKIPPED | - |"
    assert "because \\| reasons" in md  # pipes escaped
    assert "H100" in md


def test_markdown_of_a_skipped_report_states_the_reason():
    rep = R.build(
        [rule("TL104", "h2d_copies", "skipped")],
        mode="skipped",
        repeats=5,
        skipped_reason="torch 2.13.0 is a CPU-only build",
    )
    assert "GPU verification skipped: torch 2.13.0 is a CPU-only build" in R.to_markdown(rep)


def test_text_table_is_aligned():
    text = R.to_text(sample_report()).splitlines()
    assert text[0].split() == ["Rule", "Metric", "Bad", "Fixed", "Change", "Threshold", "Verdict", "Repeats"]
    assert set(text[1]) <= {"-", " "}
    assert text[2].startswith("TL104") and text[2].split()[-2:] == ["PASS", "5"]


def test_png_plot_written(tmp_path):
    path = tmp_path / "plot.png"
    R.write_plot(sample_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_plot_of_no_rules(tmp_path):
    path = tmp_path / "empty.png"
    R.write_plot(R.build([], mode="skipped", repeats=1), path)
    assert path.stat().st_size > 0


def test_value_formats():
    assert R.format_value("busy_fraction", 0.5) == "50.0%"
    assert R.format_value("wall_s", 0.0123) == "12.3 ms"
    assert R.format_value("wall_s", 2.5) == "2.500 s"
    assert R.format_value("samples_per_s", 12345.6) == "12,346/s"
    assert R.format_value("sync_count", 3.0) == "3"
    assert R.format_value("x", None) == "-"


def test_json_is_written_atomically(tmp_path, monkeypatch):
    """A write that dies half-way leaves the previous report, never half a file."""
    path = tmp_path / "r.json"
    R.write_json(sample_report(), path)
    before = path.read_text()

    def boom(self, *a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(type(path), "write_text", boom)
    try:
        R.write_json(R.build([], mode="gpu", repeats=1), path)
    except OSError:
        pass
    assert path.read_text() == before
    assert json.loads(before)["rules"]


def test_partial_report_and_not_run_rules():
    rules = [
        rule("TL104", "samples_per_s", "pass", summ(100), summ(300), 2.0, "up"),
        rule("TL401", "samples_per_s", "not-run"),
    ]
    rep = R.build(rules, mode="gpu", repeats=5, environment={"device": "H100"})
    assert rep["complete"] is False and rep["rules_not_run"] == ["TL401"]
    md = R.to_markdown(rep)
    assert "**Partial report**: not run: TL401" in md
    assert "| TL401 | samples_per_s | - | - | n/a | up >= 10% | NOT-RUN | - |" in md


def test_context_table_puts_samples_per_second_beside_the_busy_fraction():
    r = rule("TL301", "busy_fraction", "pass", summ(0.1), summ(0.9), 0.8)
    r["metrics"] = {
        "samples_per_s": {"bad": {"median": 1000.0}, "fixed": {"median": 250000.0}},
        "busy_fraction": {"bad": {"median": 0.1}, "fixed": {"median": 0.9}},
        "busy_fraction_timed": {"bad": {"median": 0.2}, "fixed": {"median": 0.92}},
        "sm_clock_mhz_start": {"bad": {"median": 1980.0}, "fixed": {"median": 1980.0}},
        "profiler_slowdown": {"bad": {"median": 2.0}, "fixed": {"median": 1.05}},
    }
    rep = R.build([r], mode="gpu", repeats=5)
    (row,) = R.context_rows(rep)
    assert row == [
        "TL301",
        "1,000/s",
        "250,000/s",
        "250.00x",
        "10.0%",
        "90.0%",
        "20.0%",
        "92.0%",
        "1980/1980 MHz",
        "2.00x/1.05x",
    ]
    assert "## Context" in R.to_markdown(rep)


def _part(rules, device="H100"):
    return R.build(rules, mode="gpu", repeats=5, environment={"device": device, "torch": "2.11.0", "cuda": "12.8"})


def test_merge_takes_measured_rules_from_each_part():
    a = _part(
        [rule("TL104", "samples_per_s", "pass", summ(1), summ(2), 1.0), rule("TL401", "samples_per_s", "not-run")]
    )
    b = _part(
        [rule("TL104", "samples_per_s", "not-run"), rule("TL401", "samples_per_s", "fail", summ(1), summ(1), 0.0)]
    )
    merged, warnings = R.merge([("a.json", a), ("b.json", b)])
    assert {r["rule"]: (r["verdict"], r["source"]) for r in merged["rules"]} == {
        "TL104": ("pass", "a.json"),
        "TL401": ("fail", "b.json"),
    }
    assert merged["complete"] is True and warnings == []
    assert merged["summary"] == {"fail": 1, "pass": 1}


def test_merge_keeps_the_later_measurement_and_says_so():
    a = _part([rule("TL104", "samples_per_s", "inconclusive", summ(1), summ(1.1), 0.1)])
    b = _part([rule("TL104", "samples_per_s", "pass", summ(1), summ(2), 1.0)])
    merged, warnings = R.merge([("a.json", a), ("b.json", b)])
    assert merged["rules"][0]["verdict"] == "pass" and warnings == [
        "TL104 was measured in both a.json and b.json: keeping b.json's"
    ]


def test_merge_refuses_different_gpus():
    with pytest.raises(R.MergeError, match="different device"):
        R.merge([("a", _part([], "H100")), ("b", _part([], "A100"))])


def test_load_json_rejects_what_is_not_a_report(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{")
    with pytest.raises(R.MergeError, match="not a readable JSON report"):
        R.load_json(bad)
    bad.write_text('{"rules": [], "schema_version": 1}')
    with pytest.raises(R.MergeError, match="schema_version 1"):
        R.load_json(bad)


def test_each_rule_shows_its_own_repeats():
    """A merged session: rules measured with different repeats (and a crash rule with one) say so per row."""
    a = _part([rule("TL401", "samples_per_s", "pass", summ(1, n=5), summ(2, n=5), 1.0, repeats=5)])
    b = _part([rule("TL104", "samples_per_s", "pass", summ(1, n=3), summ(2, n=3), 1.0, repeats=3)])
    merged, _ = R.merge([("a.json", a), ("b.json", b)])
    md = R.to_markdown(merged)
    assert "over each rule's repeats (the Repeats column)" in md and "5 repeat(s)" not in md
    assert "| TL104 | samples_per_s | 1/s | 2/s | +100.0% | up >= 10% | PASS | 3 |" in md
    assert "| TL401 | samples_per_s | 1/s | 2/s | +100.0% | up >= 10% | PASS | 5 |" in md


def test_a_crash_rule_reads_bad_crashes_fixed_runs():
    r = rule("TL102", "busy_fraction", "pass", None, summ(0.9, n=1), None, repeats=1)
    r.update(bad_error="Expected all tensors to be on the same device", bad_crash="RuntimeError: Expected all ...")
    (row,) = R.rows(R.build([r], mode="gpu", repeats=3))
    assert row == ["TL102", "busy_fraction", "crashes", "90.0%", "-", "bad crashes, fixed runs", "PASS", "1"]
    r.update(verdict="fail", bad_crash="")
    assert R.rows(R.build([r], mode="gpu", repeats=3))[0][2] == "no crash"


def test_merge_lists_expected_rules_that_no_report_has():
    a = _part([rule("TL401", "samples_per_s", "pass", summ(1), summ(2), 1.0)])
    missing = rule("TL100", "busy_fraction", "not-run")
    missing["reason"] = "not run: no merged report has this rule"
    stale = rule("TL401", "samples_per_s", "not-run")
    merged, _ = R.merge([("a.json", a)], expected=[missing, stale])
    assert {r["rule"]: (r["verdict"], r["source"]) for r in merged["rules"]} == {
        "TL100": ("not-run", R.NO_REPORT),
        "TL401": ("pass", "a.json"),
    }
    assert merged["complete"] is False and merged["rules_not_run"] == ["TL100"]


def test_merge_refuses_a_dry_run_with_a_gpu_measurement():
    a = _part([])
    b = R.build([], mode="dry-run", repeats=1, environment={"device": "H100", "torch": "2.11.0", "cuda": "12.8"})
    with pytest.raises(R.MergeError, match="dry run"):
        R.merge([("a", a), ("b", b)])
    assert "**Dry run** on the CPU" in R.to_markdown(b)
