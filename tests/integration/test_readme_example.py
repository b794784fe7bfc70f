"""The README's workflow example runs as printed."""

import re
from pathlib import Path

import pytest

from workflows.testing import run_until_idle

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.django_db
def test_readme_example__defines_starts_and_finishes_a_run():
    block = re.search(r"```python\n(# myapp/workflows.py.*?)```", README.read_text(), re.S)
    assert block, "the README lost its example"
    namespace: dict = {}
    exec(block.group(1), namespace)  # defines `registry`, starts `handle` and `other`
    run_until_idle(namespace["registry"])  # skips the example's 60 s sleep
    run = namespace["handle"].info()
    assert (run.status, run.result) == ("completed", "hello Ada")
    other = namespace["other"].info()  # started with its first message
    assert (other.status, other.result) == ("completed", "hello Grace")
    assert namespace["handle"].action("status") == {"stage": "fetching"}
