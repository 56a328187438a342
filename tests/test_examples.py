"""examples/ is the Quick start's demo: valid Python with known mistakes."""

import re
from pathlib import Path

import pytest

from torchlint.config import Settings
from torchlint.rules import all_codes
from torchlint.rules.stability import ALWAYS_REPORTED

from helpers import lint_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_example_is_valid_python(path):
    compile(path.read_text(encoding="utf-8"), str(path), "exec")


def promised() -> set:
    """(file, code) pairs examples/README.md's table promises."""
    text = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    pairs = set()
    for line in text.splitlines():
        match = re.match(r"^\| `([a-z_]+\.py)` \|[^|]*\| (.*) \|$", line)
        if match:
            pairs |= {(match.group(1), code) for code in re.findall(r"TL\d{3}", match.group(2))}
    return pairs


def test_examples_show_every_rule_the_readme_promises():
    """`torchlint --preview examples/` (the Quick start) triggers every rule
    examples/README.md promises, in the file it names, and no TL000."""
    result = lint_paths([str(EXAMPLES)], Settings(root=str(EXAMPLES), preview=True))
    found = {(Path(f.path).name, f.code) for f in result.findings}
    wanted = promised()
    assert {code for _, code in wanted} == set(all_codes()) - ALWAYS_REPORTED  # every rule is shown
    assert wanted <= found, f"missing: {sorted(wanted - found)}"
    assert found <= wanted, f"not in examples/README.md's table: {sorted(found - wanted)}"  # issue 40: TL104
    assert not any(code == "TL000" for _, code in found)
    assert result.problems == ()


def test_the_quick_start_runs_the_demo_with_preview():
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    assert "torchlint --preview examples/" in readme
