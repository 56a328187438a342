"""Developer scripts (fuzzing, rule docs generation); importable by the tests as `scripts`."""
