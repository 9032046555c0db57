"""PKB evaluator: runs a candidate on N ranks, judges it, times it and scores it.

A pure library: PyTorch and the standard library only (it runs on GPU hosts with no Django).
"""

__version__ = "0.4.0"
