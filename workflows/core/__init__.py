"""The engine's pure core: records, errors, the retry policy, the clock, JSON value checks, the
control-flow signals, the replay decision and the protocol the primitives record through
(recorder). No Django, no I/O, nothing of the layers above.
"""
