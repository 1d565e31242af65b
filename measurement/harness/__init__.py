"""Harness code: cases, oracle, backends' drivers and the timing protocol.

Nothing here imports Django: the harness runs in child processes beside candidate code,
and its source hash is the `harness_version` recorded with every measurement.
"""
