"""Benchmarks (`make bench`): not tests, they print figures."""
