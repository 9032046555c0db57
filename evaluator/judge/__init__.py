"""The judge: TRUSTED code that runs in the evaluating parent, outside every sandbox.

It owns everything a score depends on: the inputs (made here from a secret that never enters a
rank), the shared buffers they travel in, the clock (its own, around whole blocks of calls), which
calls are checked (drawn after they returned), its own copies of their outputs (taken while the
side stands frozen), the inputs' integrity after every call, and liveness (its own deadlines;
nothing a rank writes extends them). Rank processes run evaluator/shim/, which never imports
this package. docs/judge.md draws the boundary.
"""
