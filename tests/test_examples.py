"""examples/ is the Quick start's demo: valid Python with known mistakes."""

from pathlib import Path

import pytest

from torchlint.config import Settings

from helpers import lint_paths

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_example_is_valid_python(path):
    compile(path.read_text(encoding="utf-8"), str(path), "exec")


def test_examples_have_their_mistakes_and_no_tl000():
    result = lint_paths([str(EXAMPLES)], Settings(root=str(EXAMPLES)))
    found = {(Path(f.path).name, f.code) for f in result.findings}
    assert ("augment.py", "TL104") in found
    assert ("profile_step.py", "TL501") in found
    assert not any(code == "TL000" for _, code in found)
    assert result.problems == ()
