"""The benchmarks, one script each, run as modules from the checkout's root: `python -m bench.NAME --help`.
What they share is in harness.py; the figures and the commands that made them are in BENCHMARKS.md."""
