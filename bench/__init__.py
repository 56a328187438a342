"""Benchmarks; importable by the tests as `bench` (the training-script generator)."""
