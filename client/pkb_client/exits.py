"""Exit codes of the remote commands: stable, so scripts can branch on them."""

OK = 0  # done; for submit --wait / agent: the kernel passed
FAILED = 1  # evaluated, and the verdict is fail (or no agent turn passed)
USAGE = 2  # bad command line, or a local file that cannot be read
REFUSED = 3  # the portal refused the request (a 4xx other than auth, or 503 no_worker): the message says why
AUTH = 4  # not logged in, a bad token, or not allowed
UNREACHABLE = 5  # the portal could not be reached or answered with a server error (not no_worker)
TIMEOUT = 6  # --wait gave up before the evaluation finished
LOST = 7  # the evaluation was lost by the infrastructure (status failed, no report)
MODEL_COMMAND = 8  # pkb agent: the model command failed or printed nothing

TABLE = [
    (OK, "success; with --wait: verdict pass"),
    (FAILED, "evaluated, verdict fail (agent: no turn passed)"),
    (USAGE, "bad arguments or unreadable local file"),
    (REFUSED, "the portal refused the request (4xx, or 503 no_worker); the error code and message say why"),
    (AUTH, "not logged in, token rejected, or not allowed (401/403)"),
    (UNREACHABLE, "portal unreachable or server error (5xx)"),
    (TIMEOUT, "--wait timed out before the evaluation finished"),
    (LOST, "the evaluation was lost (status failed: worker crash, time limit, queue)"),
    (MODEL_COMMAND, "agent: the model command exited non-zero or printed nothing"),
]
