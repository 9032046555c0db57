"""What an adapter is: the body of a ``solution`` with our signature that calls a
ParallelKernelBench solution (``_pkb_solution``) and converts what differs. The adapters
themselves live in adapters.py and in one module per family beside it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Adapter:
    pkb_id: int
    slug: str
    note: str  # what differs between the two conventions
    cost: str  # what the conversion adds to the timed call
    body: str  # Python source defining solution(...) in terms of _pkb_solution

    @property
    def name(self) -> str:
        return f"pkb{self.pkb_id}->{self.slug}"


def root_lines(group_var: str = "group") -> str:
    """Source lines binding ``root`` to the group's first rank, as our references use it."""
    return f"    root = dist.get_global_rank({group_var}, 0)\n"
