"""The names of a durable agent run's entries: deterministic, so a replay finds its records.

A run of agent `name` numbers its model requests 1, 2, 3 (turn n is the n-th request); the tool
calls that turn's response asks for are numbered 0, 1, 2 in call order:

    <name>:turn-<n>:model                 the model request (a step)
    <name>:turn-<n>:tool:<tool>[<i>]      tool call i of turn n (a step)
    <name>:turn-<n>:approval:<tool>[<i>]  the operator's decision on it (a queue wait)
"""

from __future__ import annotations


class Turns:
    """The counters of one `DurableAgent.run` (never shared between runs)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.turn = 0
        self.calls = 0

    def next_turn(self) -> str:
        """The prefix of the next model request's entries: `<name>:turn-<n>`."""
        self.turn += 1
        self.calls = 0
        return self.prefix

    def next_call(self, tool: str) -> str:
        """The name part of the next tool call of this turn: `<tool>[<i>]`."""
        index = self.calls
        self.calls += 1
        return f"{tool}[{index}]"

    @property
    def prefix(self) -> str:
        return f"{self.name}:turn-{self.turn}"
