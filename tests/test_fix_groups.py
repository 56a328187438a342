"""Choosing which fixes of a pass to apply (source/edits.py: apply_fix_groups)."""

import random

from torchlint.findings import Edit
from torchlint.source.edits import _overlaps, _Taken, apply_fix_groups


def test_overlap_index_answers_as_comparing_with_every_span():
    rnd = random.Random(0)
    for _ in range(3000):
        chosen, taken = [], _Taken()
        for _ in range(rnd.randrange(1, 15)):
            start = rnd.randrange(0, 30)
            end = start + rnd.choice([0, 0, 1, 2, 5])
            want = any(_overlaps((start, end), t) for t in chosen)
            assert taken.overlaps(start, end) == want, (chosen, start, end)
            if not want or rnd.random() < 0.1:  # now and then spans that overlap (the slow path)
                taken.add(start, end)
                chosen.append((start, end))


def test_first_fix_wins_and_identical_fixes_count_once_applied():
    text = "a b c\n"
    insert_x = (Edit(1, 1, 1, 1, "x"),)
    groups = [
        insert_x,
        (Edit(1, 1, 1, 2, "A"),),  # starts where the first one does: skipped
        insert_x,  # the same fix again (another finding): counted, not applied twice
        (Edit(1, 3, 1, 4, "B"), Edit(1, 5, 1, 6, "C")),
    ]
    assert apply_fix_groups(text, groups) == ("xa B C\n", 3)


def test_many_fixes_in_one_pass():
    text = "".join(f"x{i} = {i}\n" for i in range(5000))
    groups = [(Edit(i + 1, 1, i + 1, 2, "y"),) for i in range(5000)]
    new, applied = apply_fix_groups(text, groups)
    assert applied == 5000 and new == text.replace("x", "y")
