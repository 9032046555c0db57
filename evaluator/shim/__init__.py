"""What runs inside a rank process beside the candidate's code: UNTRUSTED by definition.

Candidate code shares these processes and can read or rewrite anything here, so nothing in this
package holds a secret or decides what a score depends on. It maps the buffers the judge shares,
turns a call's manifest into tensors, calls the function, writes what it returned into the slot
the judge named, and says that it is done. Inputs, the clock, which calls are checked, the
comparisons and liveness all belong to the judge (evaluator/judge/), which this package never
imports. docs/judge.md draws the boundary.
"""
