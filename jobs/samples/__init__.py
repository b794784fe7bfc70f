"""Sample inputs of the example app (the quick start submits SAMPLE_PATH)."""

from pathlib import Path

SAMPLE_PATH = Path(__file__).resolve().parent / "discovery-call.txt"
