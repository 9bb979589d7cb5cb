"""Benchmarks of Rojo Chat against the fake provider: `make bench` runs them (bench/run.py)."""
