"""The contract between the portal, the worker and the evaluator: what crosses each process
boundary, written down once. Standard library only: the portal, the worker (no Django) and the
evaluator on a GPU host (torch alone) all import it.

- ``job``: the evaluation job the portal sends and the worker runs, with its deadline, and the
  ``pkb eval`` command line it becomes;
- ``progress``: the evaluator's ``PKB-PROGRESS`` lines, written and parsed;
- ``callbacks``: where a worker reports a submission's status and result;
- ``gpu``: the environment every process on a GPU host must carry.
"""
