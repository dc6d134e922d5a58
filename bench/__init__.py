"""Benchmark harness: Trawl side by side with Recoll (python -m bench.run)."""
