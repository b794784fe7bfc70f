"""The multi-host test bed: runners in network namespaces of their own, over a private PostgreSQL
cluster, with skewed clocks, freezes, partitions, link cuts and latency (see bed.py, ledger.py)."""
