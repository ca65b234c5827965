"""Benchmarks are the seed document's claims; see each file's docstring."""
