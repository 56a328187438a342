"""Runtime verification: run each rule's bad/fixed fixture pair on a GPU and
measure that the fix makes the GPU work harder (torch is imported lazily)."""
