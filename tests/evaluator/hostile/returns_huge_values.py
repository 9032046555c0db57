"""Attack (all-reduce in bfloat16): return 3e38 everywhere, near bfloat16's largest value.

Wrong, and judged wrong; but the comparison sums the squares of a 16-bit output's errors in
float32 and divides them by the exact answer there, and both overflow: the report's candidate
error (its root mean square) and largest relative error were Infinity. Infinity is not JSON: the
report broke the schema's numbers, and the portal's database refuses it, so the failing verdict
could not be stored (a worker posts it, gets a 500, retries and spools it)."""

import torch


def solution(x, *, group):
    return torch.full_like(x, 3.0e38)
