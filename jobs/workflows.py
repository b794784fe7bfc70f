"""The example app's workflows (placeholder registry until the AI job lands)."""

from workflows import setup

registry = setup(use={})
