"""The tutorial (docs/tutorial.md) runs as printed: every Python block of the page, in order, in
one namespace, as a reader pasting them into `manage.py shell` would. Its `assert` lines are the
checks, so the page and the engine cannot drift apart."""

import re
from pathlib import Path

import pytest

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def tutorial_blocks() -> list[str]:
    return BLOCK.findall(TUTORIAL.read_text())


def test_the_tutorial_has_its_sections_and_checks():
    blocks = tutorial_blocks()
    assert len(blocks) >= 6, "the tutorial lost its examples"
    assert sum(block.count("assert ") for block in blocks) >= 10, "the tutorial's blocks check little"


@pytest.mark.django_db
def test_the_tutorial_runs_as_printed():
    namespace: dict = {}
    for number, block in enumerate(tutorial_blocks(), 1):
        code = compile(block, f"{TUTORIAL.name}, python block {number}", "exec")
        exec(code, namespace)  # each block's asserts check what the page says it does
