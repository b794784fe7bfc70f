"""The engine's pure core: records, errors, the retry policy, the clock, JSON value checks, the
control-flow signals and the replay decision. No Django, no I/O, nothing of the layers above.
"""
