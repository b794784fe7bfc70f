"""Benchmarks of the engine: scripts that print figures (never timed tests). See engine.py."""
