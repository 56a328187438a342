"""Property-based fuzzing, bounded and derandomised for CI (scripts/fuzz.py runs longer):
lint never raises; a fix's output parses and fixing it again changes nothing."""

import random

import hypothesmith
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripts.fuzzlib import bytes_program, check_bytes, check_program, corpus, deep_program, mutated

pytestmark = [
    pytest.mark.filterwarnings("ignore::SyntaxWarning"),  # from hypothesmith
    # The properties are checked with the default settings (scripts/fuzzlib.py): with TL303
    # stable they cover a rule's findings and fixes, whatever the catalog says.
    pytest.mark.usefixtures("stable_rule"),
]

CI = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
CORPUS = corpus()


def test_corpus_is_not_empty():
    assert len(CORPUS) >= 4


@CI
@given(hypothesmith.from_grammar())
def test_grammar_programs(src):
    assert check_program(src) is None


@CI
@given(mutated(CORPUS))
def test_mutated_real_code(src):
    assert check_program(src) is None


@settings(CI, max_examples=30)
@given(mutated(CORPUS))
def test_mutated_real_code_safe_fixes(src):
    assert check_program(src, unsafe=False) is None


@settings(CI, max_examples=15)
@given(st.integers(0, 2**32))
def test_deeply_nested_programs(seed):
    assert check_program(deep_program(random.Random(seed), max_depth=1500)) is None


@settings(CI, max_examples=40)
@given(st.integers(0, 10_000), st.integers(0, 2**32))
def test_file_bytes(i, seed):
    rnd = random.Random(seed)
    assert check_bytes(bytes_program(CORPUS[i % len(CORPUS)], rnd)) is None


@settings(CI, max_examples=40)
@given(st.binary(max_size=300))
def test_arbitrary_bytes(data):
    assert check_bytes(data) is None
