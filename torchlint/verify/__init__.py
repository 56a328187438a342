"""Runtime verification: run each rule's bad/fixed fixture pair on a GPU and
measure that the fix makes the GPU work harder (torch is imported lazily).

Entry points: `torchlint verify` / `torchlint doctor`, or, with only click
and torch installed, `python -m torchlint.verify` / `python -m torchlint.verify doctor`."""
