"""Rule isolation and fix safety: a bug in one rule, in a fix or in shared
analysis becomes a Problem; fixes never return code that does not parse;
fix passes are bounded; overlapping fixes are applied one at a time."""

import libcst as cst
import pytest

import torchlint.analysis
import torchlint.engine.checker as checker
import torchlint.engine.fix_loop as fix_loop
import torchlint.engine.pipeline as pipeline
import torchlint.source.parsing as parsing
from torchlint.analysis.places import Places
from torchlint.findings import Applicability
from torchlint.rules import all_rules, rule_by_code
from torchlint.rules.base import Rule

CUDA_SRC = "import torch\nx = torch.zeros(2).cuda()\n"
CUDA_FIXED = 'import torch\nx = torch.zeros(2, device="cuda")\n'
TL501_SRC = rule_by_code("TL501").INVALID[0].code
BOTH = TL501_SRC + "x = torch.zeros(2).cuda()\n"
REAL = frozenset(r.CODE for r in all_rules())


def with_rules(monkeypatch, *extra):
    for rule in extra:  # fake rules look at any text (the pre-check must not skip their files)
        rule.TRIGGERS = r"."
    rules = tuple(all_rules()) + extra
    monkeypatch.setattr(checker, "all_rules", lambda: rules)
    return REAL | {r.CODE for r in extra}


def codes(result):
    return sorted({f.code for f in result.findings})


# ---- rule isolation ----


def test_crashing_rule_is_a_problem_and_others_still_report(monkeypatch):
    def boom(self, ctx):
        raise ZeroDivisionError("rule bug")

    monkeypatch.setattr(rule_by_code("TL104"), "check", boom)
    result = pipeline.lint_text(BOTH, "both.py", REAL)
    assert codes(result) == ["TL501"]
    (problem,) = result.problems
    assert problem.rule == "TL104" and problem.path == "both.py"
    assert "ZeroDivisionError: rule bug" in problem.message


def test_crashing_rule_reports_made_before_the_crash_are_dropped(monkeypatch):
    class HalfThenCrash(Rule):
        CODE, NAME, MESSAGE = "TL990", "half", "half"

        def check(self, ctx):
            ctx.report(ctx.module.body[0])
            raise RuntimeError("after one report")

    enabled = with_rules(monkeypatch, HalfThenCrash)
    result = pipeline.lint_text(BOTH, "h.py", enabled)
    assert codes(result) == ["TL104", "TL501"]
    assert [p.rule for p in result.problems] == ["TL990"]


def test_crash_while_building_a_fix_keeps_the_finding(monkeypatch):
    def boom(*args):
        raise ValueError("fix bug")

    # Both ways of building a fix: node-local edits and the whole-module rewrite.
    monkeypatch.setattr(pipeline, "fix_edits", boom)
    monkeypatch.setattr(pipeline, "replace_nodes", boom)
    result = pipeline.lint_text(CUDA_SRC, "f.py", REAL)
    (finding,) = result.findings
    assert finding.code == "TL104" and finding.fix is None
    (problem,) = result.problems
    assert problem.rule == "TL104" and "fix bug" in problem.message
    fixed = pipeline.fix_text(CUDA_SRC, "f.py", REAL)
    assert fixed.fixed_source == CUDA_SRC


def test_crash_in_shared_facts_is_a_problem_for_the_file(monkeypatch):
    def boom(module):
        raise KeyError("facts bug")

    monkeypatch.setattr(torchlint.analysis, "collect_facts", boom)
    result = pipeline.lint_text(BOTH, "s.py", REAL)
    assert result.findings == ()
    (problem,) = result.problems
    assert problem.path == "s.py" and "internal error in analysis" in problem.message
    assert pipeline.fix_text(BOTH, "s.py", REAL).fixed_source == BOTH


def test_crash_in_semantics_blames_the_rules_that_asked(monkeypatch):
    class NeedsDevice(Rule):
        CODE, NAME, MESSAGE = "TL991", "needs-device", "m"
        REQUIRES_DEVICE = True

        def check(self, ctx):  # pragma: no cover - never reached
            ctx.report(ctx.module.body[0])

    def boom(self):
        raise AttributeError("semantics bug")

    monkeypatch.setattr(Places, "accelerator_in_play", boom)
    enabled = with_rules(monkeypatch, NeedsDevice)
    result = pipeline.lint_text(BOTH, "d.py", enabled)
    assert codes(result) == ["TL104", "TL501"]
    # Every rule that asked (TL991, and real rules that consult accelerator_in_play) is blamed;
    # TL104 and TL501, which don't ask, still report.
    blamed = [p.rule for p in result.problems]
    assert "TL991" in blamed and "TL104" not in blamed and "TL501" not in blamed
    assert all("semantics bug" in p.message for p in result.problems)


def test_positions_failure_is_a_problem(monkeypatch):
    def boom(*args):
        raise RuntimeError("positions bug")

    monkeypatch.setattr(pipeline, "render", boom)
    result = pipeline.lint_text(CUDA_SRC, "p.py", REAL)
    assert result.findings == () and "positions bug" in result.problems[0].message


# ---- fixes never lose code ----


class Garbage(cst.Name):
    """A node that prints as code that does not parse."""

    def _codegen_impl(self, state, default_semicolon=False):
        state.add_token("= = (")


class BrokenFix(Rule):
    CODE, NAME, MESSAGE = "TL992", "broken-fix", "broken"
    FIX_TITLE = "break it"
    APPLICABILITY = Applicability.SAFE

    def check(self, ctx):
        for stmt in ctx.module.body:
            for small in getattr(stmt, "body", ()):
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Name) and small.value.value == "marker":
                    ctx.report(small.value, replacements={small.value: Garbage("marker")})


def test_unparsable_fix_is_refused_and_reported_and_others_still_apply(monkeypatch):
    enabled = with_rules(monkeypatch, BrokenFix)
    src = "marker\n" + CUDA_SRC
    result = pipeline.fix_text(src, "b.py", enabled)
    assert result.fixed_source == "marker\n" + CUDA_FIXED
    cst.parse_module(result.fixed_source)
    assert [p.rule for p in result.problems] == ["TL992"]
    assert "does not parse" in result.problems[0].message
    assert codes(result) == ["TL992"]


def test_unparsable_fix_alone_leaves_the_source(monkeypatch):
    enabled = with_rules(monkeypatch, BrokenFix)
    result = pipeline.fix_text("marker\n", "b.py", enabled)
    assert result.fixed_source == "marker\n" and result.fixes_applied == 0
    assert [p.rule for p in result.problems] == ["TL992"]


class Grow(Rule):
    """A fix that never clears its finding: `a` becomes `aa`, forever."""

    CODE, NAME, MESSAGE = "TL993", "grow", "grow"
    FIX_TITLE = "grow"
    APPLICABILITY = Applicability.SAFE

    def check(self, ctx):
        stmt = ctx.module.body[0]
        name = stmt.body[0].value
        ctx.report(name, replacements={name: name.with_changes(value=name.value + "a")})


def test_fix_passes_are_bounded(monkeypatch):
    enabled = with_rules(monkeypatch, Grow)
    result = pipeline.fix_text("a\n", "g.py", enabled)
    assert result.fixed_source == "a" * (fix_loop.MAX_FIX_PASSES + 1) + "\n"
    assert result.fixes_applied == fix_loop.MAX_FIX_PASSES
    assert any("did not converge" in p.message and "TL993" in p.message for p in result.problems)


class WrapCall(Rule):
    """Two fake rules that both rewrite the same call: `f(x)` -> `g(f(x))` and `f(x)` -> `h(f(x))`."""

    CODE, NAME, MESSAGE = "TL994", "wrap-g", "wrap"
    FIX_TITLE = "wrap"
    APPLICABILITY = Applicability.SAFE
    WRAPPER = "g"

    def check(self, ctx):
        for stmt in ctx.module.body:
            expr = stmt.body[0].value
            if isinstance(expr, cst.Call) and expr.func.value == "f":
                call = expr
            elif isinstance(expr, cst.Call) and expr.args and isinstance(expr.args[0].value, cst.Call):
                inner = expr.args[0].value
                if inner.func.value != "f" or self.WRAPPER in (expr.func.value,):
                    continue
                # Already wrapped by the other rule: wrap the inner call too.
                call = inner
            else:
                continue
            new = cst.Call(cst.Name(self.WRAPPER), [cst.Arg(call)])
            ctx.report(call, replacements={call: new})


class WrapCallH(WrapCall):
    CODE, NAME = "TL995", "wrap-h"
    WRAPPER = "h"


def test_overlapping_fixes_apply_one_at_a_time(monkeypatch):
    enabled = with_rules(monkeypatch, WrapCall, WrapCallH)
    result = pipeline.lint_text("f(x)\n", "o.py", enabled)
    assert codes(result) == ["TL994", "TL995"]
    fixed = pipeline.fix_text("f(x)\n", "o.py", enabled)
    # TL994 wins the first pass (sorted order); TL995 is re-linted and applied on the new text.
    assert fixed.fixed_source == "g(h(f(x)))\n"
    assert fixed.fixes_applied == 2
    cst.parse_module(fixed.fixed_source)


def test_fix_is_idempotent_on_examples():
    for rule in all_rules():
        for ex in rule.INVALID:
            once = pipeline.fix_text(ex.code, "e.py", REAL, unsafe=True).fixed_source
            twice = pipeline.fix_text(once, "e.py", REAL, unsafe=True).fixed_source
            assert once == twice, rule.CODE


def test_rule_recursion_error_is_that_rules_problem(monkeypatch):
    def deep(self, ctx):
        return deep(self, ctx)

    monkeypatch.setattr(rule_by_code("TL104"), "check", deep)
    result = pipeline.lint_text(BOTH, "r.py", REAL)
    assert codes(result) == ["TL501"]
    assert [(p.rule, "nested" in p.message) for p in result.problems] == [("TL104", True)]


def test_big_stack_parse_falls_back_when_no_thread_can_start(monkeypatch):
    class NoThread:
        def __init__(self, *a, **k):
            pass

        def start(self):
            raise RuntimeError("can't start new thread")

    monkeypatch.setattr(parsing.threading, "Thread", NoThread)
    module = parsing._in_big_stack(cst.parse_module, "x = 1\n")
    assert module.code == "x = 1\n"


def test_big_stack_parse_reraises_in_caller():
    with pytest.raises(cst.ParserSyntaxError):
        parsing._in_big_stack(cst.parse_module, "x = (\n")
