"""Starts one side's rank processes in a box, watches their progress, and stops them when they stall.

Every rank has three pipes to us: status channel, stdout/stderr, and its Python stack dumps; in
an evaluation a fourth carries our timing commands to it (``command``), and a rank working on a
command is held to the deadline we set, whatever it writes meanwhile. A rank
that makes no progress within the limit has its stacks dumped, then the whole side is killed (peers
of a stuck rank spin forever). In the confined box (the default) that kill takes every process the
side started, and only then are its outputs copied out: nothing of the side can change them.
"""

from __future__ import annotations

import json
import os
import re
import select
import selectors
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional

from .bytecode_cache import CACHE_ENV, RANK_PRELUDE, ranks_cache
from .channel import BUILD, BUILT, CALLED, DONE, ERROR, READY, STEP, TIMES, WAITING, new_token, parse_lines
from .config import Limits, ResourceLimits
from .job import CHECKED_CALLS, CHECKED_COPIES, RankJob
from .judge.host_tcp import host_tcp_pages
from .judge.liveness import BusyWatch, side_cpu_seconds, thread_run_ns
from .report import Failure, FailureClass, make_failure
from .sandbox import RankLaunch, SandboxError, open_box
from .sandbox.box import OutputRules
from .sandbox.policy import REPO_ROOT, rank_env
from .side import RankState, SideResult, append_tail
from .side_diagnosis import SideDiagnosis

TAIL_BYTES = 6000
STACK_BYTES = 64_000
MAX_LINE_BYTES = 1 << 20
# What a side's messages can make the evaluator keep: errors and second answers (the first few say
# all there is), and progress labels per rank (a real run writes a few hundred).
MAX_KEPT = 16
# How long the judge waits for room in a rank's command pipe before it calls the side's silence a
# protocol violation (an honest rank reads at once; a long command line may need a few reads).
COMMAND_WRITE_S = 5.0
MAX_LABELS = 4096
# What the in-rank judge reads of a rank's answer to a block (paired.PairedTimer._block).
BLOCK_ANSWER_FIELDS = ("block", "first_call", "times_ms", "gap_ms", "digests", "copies")
MAX_LABEL_CHARS = 200  # a step's label as kept (the harness's are a few words)
# A progress event's step, as the hook gets it: the harness's are short text (its start-up summary
# names a few phases).
MAX_STEP_CHARS = 400
# `python -I`: no environment variables, no user site, nothing importable from the working
# directory; the harness's packages come from the (read-only) checkout.
RANK_ENTRY = (RANK_PRELUDE + f"sys.path.insert(0, {str(REPO_ROOT)!r}); "
              "from evaluator.rank_main import main; main()")


ProgressHook = Callable[[str, dict[str, Any]], None]


class SideRun(SideDiagnosis):
    def __init__(self, job: RankJob, workdir: Path, limits: Limits, timing_s: float,
                 on_progress: Optional[ProgressHook] = None, *, sandbox: bool = True,
                 resources: Optional[ResourceLimits] = None, salts: Optional[list[str]] = None,
                 buffers: Optional[list[Any]] = None, seed_secret: str = "") -> None:
        self.on_progress = on_progress
        # The judge's shared buffers, one pair per rank (evaluator/judge/buffers.py): the side is
        # then judged, and nothing it writes extends a deadline.
        self.buffers = buffers
        self.salts = salts  # rank -> the secret mixed into its own inputs (None: unsalted)
        # Mixed by every rank into every seed it draws inputs from (problems/spec.py secret_seed),
        # where the ranks make their own inputs (GPUs judged in the ranks); "" where the seeds in
        # the job are mixed already (the judge's reference) or the judge makes the inputs.
        self.seed_secret = seed_secret
        self.token = new_token()
        self.job = job
        self.side = job["side"]
        self.side_dir = box_dir(workdir, self.side)
        self.limits = limits
        self.timing_s = timing_s
        self.sandbox = sandbox
        self.resources = resources or ResourceLimits()
        self.ranks: list[RankState] = []
        self.ready: dict[int, dict[str, Any]] = {}
        self.done: dict[int, dict[str, Any]] = {}
        self.times: dict[tuple[int, int], dict[str, Any]] = {}
        self.errors: list[dict[str, Any]] = []
        self.crashes: list[tuple[int, int]] = []  # (rank, returncode) of ranks that died silently
        self.limit: Optional[dict[str, Any]] = None  # the box's report of a resource limit
        self.first_problem_at: Optional[float] = None
        self.fingerprints: dict[tuple[int, str, int], list[dict[str, Any]]] = {}  # (task, step, rank)
        self.blocks: dict[tuple[int, int], dict[str, Any]] = {}  # (block, rank) -> its TIMES event
        self.duplicate_blocks: list[tuple[int, int]] = []  # (block, rank) answered more than once
        self.called: list[tuple[int, int, int]] = []  # (rank, block, call) said done, not yet taken
        self.stray: Optional[Failure] = None  # a judged side's status channel carried someone else's lines
        self.out_of_time = False  # it failed for running past its whole allowance (total_s)
        self.last_block = 0  # the latest block commanded: an answer to any other proves nothing
        self.finishing = False  # the judge has sent "finish": only then may a judged rank say done
        # Seconds the side stood thawed (from its launch, less its freezes): whose running the
        # evaluation's time went to, when a deadline passes (api.Evaluation._run_judged).
        self.ran_s = 0.0
        self.running_since: Optional[float] = None
        self.failure: Optional[Failure] = None
        self.box: Any = None
        self.selector: Optional[selectors.BaseSelector] = None
        self.started = time.monotonic()
        self.build_ended_at = 0.0  # when a rank last finished a build (peers waited for it)
        self.build_credit_s = 0.0  # seconds a judged side ran past its deadlines while working
        self.busy_watch = BusyWatch()
        self.host_tcp_at_start: Optional[int] = None  # pages, when the side began (begin)

    def rank_job(self, box: Any) -> RankJob:
        """The job as the ranks see it: paths inside their box, the solution copied in."""
        job = RankJob(**self.job)
        job["store_path"] = str(box.work / "store")
        job["out_dir"] = str(box.work / "out")
        if job.get("solution_path"):
            # Its own name, so that tracebacks and stacks point at the file the author knows.
            name = Path(job["solution_path"]).name
            name = name if re.fullmatch(r"[A-Za-z0-9_.-]{1,100}\.py", name) and name != "job.json" else "solution.py"
            shutil.copyfile(job["solution_path"], self.inbox / name)
            job["solution_path"] = str(box.inbox / name)
        return job

    def output_rules(self) -> OutputRules:
        """No more files than the job can produce, no more bytes than the side's disk holds."""
        checked = CHECKED_CALLS if self.buffers is not None else CHECKED_COPIES
        per_rank = sum(len(t["trials"]) + (checked if t.get("timing") else 0) for t in self.job["tasks"])
        exact = self.side == "reference"  # a trial's exact answers: one more file per trial
        return OutputRules(tasks=frozenset(int(t["task"]) for t in self.job["tasks"]),
                           world_size=self.job["world_size"],
                           max_files=per_rank * self.job["world_size"] * (2 if exact else 1),
                           max_bytes=self.resources.disk_bytes, exact_answers=exact)

    def start(self) -> Any:
        self.inbox = self.side_dir / "in"
        self.inbox.mkdir(parents=True, exist_ok=True)
        box = open_box(self.side_dir, self.inbox, self.job["device"], self.resources, confined=self.sandbox)
        (self.inbox / "job.json").write_text(json.dumps(self.rank_job(box)))
        env = rank_env(self.job["device"], self.job.get("threads", 1), home=box.home, work=box.work,
                       confined=box.confined)
        if box.confined and (cache := ranks_cache()) is not None:
            env[CACHE_ENV] = cache  # bound read-only into the side (confined.py): compiled once per host
        launches, theirs = [], []
        for rank in range(self.job["world_size"]):
            (status_r, status_w), (log_r, log_w), (stack_r, stack_w) = os.pipe(), os.pipe(), os.pipe()
            # The token, the rank's input salt and the side's seed secret arrive on stdin, read
            # before the candidate is imported: never in the environment (which
            # /proc/self/environ keeps after os.environ forgets it), nor in the job, which every
            # rank of the side can read.
            token_r, token_w = os.pipe()
            salt = self.salts[rank] if self.salts else ""
            os.write(token_w, b"\n".join(s.encode() for s in (self.token, salt, self.seed_secret)) + b"\n")
            os.close(token_w)
            argv = [sys.executable, "-I", "-c", RANK_ENTRY, str(box.inbox / "job.json"), str(rank),
                    str(status_w), str(stack_w)]
            keep: tuple[int, ...] = (status_w, stack_w)
            state = RankState(rank, status_r, log_r, stack_r)
            if self.job.get("driven"):
                command_r, state.command_fd = os.pipe()
                os.set_inheritable(state.command_fd, False)
                os.set_blocking(state.command_fd, False)  # see write_command: never blocks for ever
                argv.append(str(command_r))
                keep += (command_r,)
                theirs.append(command_r)
            if self.buffers is not None:
                keep += self.buffers[rank].fds()
                argv += self.buffers[rank].rank_args()
            launches.append(RankLaunch(rank, argv, env, keep, log_w, token_r))
            theirs += [status_w, log_w, stack_w, token_r]
            self.ranks.append(state)
        try:
            box.start(launches)
        finally:
            for fd in theirs:
                os.close(fd)
            for rank_buffers in self.buffers or []:
                rank_buffers.close_fds()  # the ranks hold their own; our maps stay
        return box

    def begin(self) -> Optional[Failure]:
        """Start the ranks; a failure here is the sandbox's, not the side's."""
        self.started = time.monotonic()
        self.running_since = self.started
        # The host's TCP memory before anything of the side runs: what the judge holds a stopped
        # candidate's to (judge/host_tcp.py, red team, fills_the_hosts_tcp_memory).
        self.host_tcp_at_start = host_tcp_pages()
        # poll, not epoll: epoll watches are counted per host user (fs.epoll.max_user_watches), and
        # without root the ranks run as the evaluator's user, so a candidate that spends them
        # would leave the judge unable to watch its own pipes (red team, eighth pass).
        self.selector = selectors.PollSelector()
        try:
            self.box = self.start()
        except SandboxError as exc:
            self.failure = make_failure(FailureClass.HARNESS_ERROR, f"the sandbox could not be set up: {exc}")
            return self.failure
        for state in self.ranks:
            for fd in (state.status_fd, state.log_fd, state.stack_fd):
                self.selector.register(fd, selectors.EVENT_READ, state)
        if self.box.fileno() is not None:
            self.selector.register(self.box.fileno(), selectors.EVENT_READ, None)
        if self.on_progress is not None:  # the ranks' own start-up follows (their ready step)
            self.on_progress(self.side, {"event": STEP, "step": f"sandbox started in "
                                         f"{time.monotonic() - self.started:.1f} s", "task": None})
        return None

    def run(self) -> SideResult:
        """The whole side on its own: start, watch until every rank is done or one fails, end."""
        if self.begin() is None:
            while self.poll(0.2) is None and not self.finished():
                pass
        return self.end()

    def finished(self) -> bool:
        return all(state.finished for state in self.ranks)

    def waiting(self) -> bool:
        """Every rank has answered our last command and waits for the next."""
        return all(state.waiting for state in self.ranks)

    def command(self, payload: dict[str, Any], within_s: Optional[float]) -> None:
        """Send every rank the same command. ``within_s``: the deadline for its answer; None:
        the rank works through steps again (the usual per-step limits apply)."""
        line = (json.dumps(payload) + "\n").encode()
        now = time.monotonic()
        self.finishing = self.finishing or payload.get("cmd") == "finish"
        if isinstance(payload.get("block"), int):
            self.last_block = payload["block"]
        for state in self.ranks:
            state.waiting = False
            state.commanded = True
            state.last_progress = now
            state.deadline = now + within_s if within_s is not None else None
            state.calls_left = 0  # no command of this kind has calls: a "called" answers nothing
            if self.buffers is not None:  # a judged side's last command: named in a diagnosis
                state.command, state.command_limit_s = str(payload.get("cmd", "")), within_s or 0.0
                state.builds_allowed = False
            if state.command_fd is not None:
                self.write_command(state.rank, line)

    def command_each(self, payloads: list[dict[str, Any]], within_s: float, what: str,
                     builds: bool = False) -> None:
        """Send rank r ``payloads[r]``, each to be answered within ``within_s``; ``what`` names it
        in a diagnosis. ``builds``: a build the rank announces meanwhile runs on the build limit
        (the first trials, where PKB's files compile), not on ``within_s``."""
        now = time.monotonic()
        for state, payload in zip(self.ranks, payloads):
            if isinstance(payload.get("block"), int):
                self.last_block = payload["block"]
            state.waiting = False
            state.commanded = True
            state.last_progress = now
            state.deadline = now + within_s
            state.command, state.command_limit_s, state.builds_allowed = what, within_s, builds
            state.claimed, state.answered_after = 0, None
            # The harness says "called" after each call of a block but its last, released call by
            # call; released by block, never.
            calls = payload.get("calls") if payload.get("cmd") == "calls" and payload.get("release") != "block" else None
            state.calls_left = max(0, len(calls) - 1) if isinstance(calls, list) else 0
            self.send_to(state.rank, payload)

    def take_called(self) -> list[tuple[int, int, int]]:
        """The (rank, block, call) each rank said it finished since the last look."""
        called, self.called = self.called, []
        return called

    def send_to(self, rank: int, payload: dict[str, Any]) -> None:
        """Write one command to one rank; no deadline moves (``command_each`` sets them, and the
        judge's ``go`` within a block is part of the command the rank is answering)."""
        if self.ranks[rank].command_fd is not None:
            self.write_command(rank, (json.dumps(payload) + "\n").encode())

    def write_command(self, rank: int, line: bytes) -> None:
        """Write a command to a rank's pipe, waiting for room at most COMMAND_WRITE_S. The rank
        holds the read end: it can shrink the pipe and stop reading, and a blocking write would
        then hold the judge, and every deadline it keeps, for ever (red team, fills_command_pipe).
        The harness reads each command as it comes, so a pipe that stays full is the side's doing."""
        fd = self.ranks[rank].command_fd
        view, give_up = memoryview(line), time.monotonic() + COMMAND_WRITE_S
        while view:
            try:
                view = view[os.write(fd, view):]
                continue
            except BlockingIOError:
                pass
            except OSError:
                return  # the rank is gone (EPIPE): its exit is what we report
            left = give_up - time.monotonic()
            if left <= 0:
                self.stray = self.stray or make_failure(
                    FailureClass.PROTOCOL_VIOLATION,
                    f"rank {rank} stopped reading the judge's commands: its command pipe stayed full for "
                    f"{COMMAND_WRITE_S:.0f} s (the harness reads each command as it comes)", rank=rank)
                return
            select.select([], [fd], [], left)

    def cpu_seconds(self) -> float:
        """Processor seconds the side's processes used so far, reaped children's included."""
        if self.box is None:
            return 0.0
        return side_cpu_seconds(self.box.process_ids(), self.box.reaper_id())

    def thread_run_ns(self) -> dict[tuple[int, int], int]:
        """Nanoseconds each thread of the side's processes has run (judge/liveness.py)."""
        return thread_run_ns(self.box.process_ids()) if self.box is not None else {}

    def freeze(self) -> bool:
        frozen = self.box is not None and self.box.freeze()
        if self.running_since is not None:
            self.ran_s += time.monotonic() - self.running_since
            self.running_since = None
        return frozen

    def run_seconds(self) -> float:
        """Seconds the side has stood thawed so far."""
        now = time.monotonic()
        return self.ran_s + (now - self.running_since if self.running_since is not None else 0.0)

    def _working(self) -> bool:
        """Whether the side's processes used a processor lately (judge/liveness.py)."""
        if self.box is None:
            return False
        return self.busy_watch.busy(self.box.process_ids())

    def thaw(self) -> None:
        if self.running_since is None:
            self.running_since = time.monotonic()
        if self.box is not None:
            self.box.thaw()
            judged_candidate = self.buffers is not None and self.side == "candidate"
            if judged_candidate and getattr(self.box, "started_while_frozen", False):
                # A process started while the side stood stopped was started by one that ran (a
                # SIGCONT it had a timer send), and its work ran beside the other side; one gone
                # before the judge read the side (reaped by the kernel where its parent ignores
                # SIGCHLD) was in none of the judge's readings (red team, forks_burners_while_frozen).
                self.stray = self.stray or make_failure(
                    FailureClass.PROTOCOL_VIOLATION,
                    "a process or thread of the candidate's side was started while the side stood stopped "
                    "(a process continued by a SIGCONT it had sent itself, say: work that escapes the freeze "
                    "runs beside the other side)")

    def poll(self, timeout: float) -> Optional[Failure]:
        """Read what the ranks said within ``timeout`` seconds; the side's failure, once there is one."""
        if self.failure is not None:
            return self.failure
        self._read(self.selector, timeout)
        if self.stray is not None:
            self.failure = self.stray
            return self.failure
        now = time.monotonic()
        self._box_events(self.selector, self.box, now)
        for state in self.ranks:
            code = state.returncode
            if code is None or state.finished or state.rank in {r for r, _ in self.crashes} \
                    or any(e.get("rank") == state.rank for e in self.errors):
                continue
            if code == 0 and state.rank in self.done:
                state.finished = True
                continue
            self.crashes.append((state.rank, code))
            self.first_problem_at = self.first_problem_at or now
        if self.limit is not None:
            self.failure = self._resource_failure()
        elif self.finished():
            return None
        elif self.first_problem_at is not None:
            all_exited = all(s.returncode is not None for s in self.ranks)
            if all_exited or now - self.first_problem_at > self.limits.error_grace_s:
                self.failure = self._failure_from_problems()
        else:
            if self.box is not None and self.busy_watch.due() \
                    and any(s.builds_allowed and s.deadline is not None for s in self.ranks):
                # A trial that may build: the samples _overdue will judge the side's work on.
                self.busy_watch.note(self.box.process_ids())
            over_total = now - self.started > self.limits.total_s
            if over_total or any(self._overdue(s, now) for s in self.ranks):
                self.out_of_time = over_total
                self.failure = self._deadlock(self.selector, self.box, over_total)
        return self.failure

    def end(self) -> SideResult:
        """Kill whatever of the side still runs, copy out its outputs, close our ends."""
        try:
            if self.box is not None:
                self.box.stop()
                if not (self.buffers is not None and self.side == "candidate"):
                    # A judged candidate's outputs are the judge's own copies, never its files.
                    self.box.copy_outputs(Path(self.job["out_dir"]), self.output_rules())
        finally:
            if self.selector is not None:
                self.selector.close()
            if self.box is not None:
                self.box.close()
            for state in self.ranks:
                for fd in (state.status_fd, state.log_fd, state.stack_fd, state.command_fd):
                    if fd is not None:
                        os.close(fd)
        return SideResult(self.side, self.failure, self.ready, self.done, self.times, self.errors,
                          time.monotonic() - self.started, {s.rank: s.labels for s in self.ranks},
                          self.fingerprints, confined=self.box.confined if self.box is not None else self.sandbox,
                          blocks=self.blocks, build_s=self._build_seconds())

    def _build_seconds(self) -> dict[int, float]:
        now = time.monotonic()
        return {s.rank: s.build_s + (now - s.building_since if s.building_since is not None else 0.0)
                for s in self.ranks if s.build_s or s.building_since is not None}

    def _overdue(self, state: RankState, now: float) -> bool:
        if state.finished or state.waiting:
            return False
        if state.deadline is not None:
            if now <= state.deadline:
                return False
            if state.builds_allowed and self.build_credit_s < self.limits.build_s and self._working():
                # A build inside a trial (PKB's files compile in their first call): the judge sees
                # the side use a processor, so it may run on, a second at a time, for the build
                # limit in all. A message saying "building" buys nothing (judge/liveness.py).
                self.build_credit_s += now - state.deadline + 1.0
                for peer in self.ranks:
                    if peer.deadline is not None:
                        peer.deadline = now + 1.0
                return False
            return True
        if self.buffers is not None:
            # Judged: the start (imports and builds) has one fixed allowance from the launch;
            # whatever a rank writes meanwhile extends nothing.
            return now - self.started > self.limits.startup_s + self.limits.build_s
        # While any rank builds, its peers wait for it (at a lock or a collective): only the
        # build limit runs, and their step clocks start again when the build ends.
        if any(s.building_since is not None for s in self.ranks):
            return state.building_since is not None and now - state.building_since > self.limits.build_s
        return now - max(state.last_progress, self.build_ended_at) > self._limit(state)

    def _read(self, selector: selectors.BaseSelector, timeout: float) -> None:
        for key, _ in selector.select(timeout=timeout):
            state: Optional[RankState] = key.data
            if state is None:
                continue  # the box has news: read by _box_events
            chunk = os.read(key.fd, 65536)
            if not chunk:
                selector.unregister(key.fd)
            elif key.fd == state.log_fd:
                state.log_tail = append_tail(state.log_tail, chunk, TAIL_BYTES)
            elif key.fd == state.stack_fd:
                state.stacks = append_tail(state.stacks, chunk, STACK_BYTES)
            else:
                events, state.buffer = parse_lines(state.buffer + chunk)
                if len(state.buffer) > MAX_LINE_BYTES:
                    state.buffer = b""  # no real message is this long: never let a rank fill our memory
                    self._stray_line(state, "a line of more than 1 MiB")
                for event in events:
                    try:
                        self._on_event(state, event)
                    except (ValueError, TypeError, KeyError, AttributeError):
                        # A message with the token whose fields are not what the harness writes.
                        kind = str(event.get("event"))[:40]
                        self._stray_line(state, f"a {kind!r} message with fields of the wrong type")

    def _stray_line(self, state: RankState, what: str) -> None:
        """Something other than the harness wrote to a rank's status channel. The harness writes
        only its own messages there, so on a judged side that is the candidate's doing, and it
        ends the side: such lines cost the judge time to read (parsed junk used to land on the
        reference's clock, red-team attack floods_status_pipe) and prove nothing."""
        if self.buffers is not None and self.stray is None:
            self.stray = make_failure(FailureClass.PROTOCOL_VIOLATION,
                                      f"rank {state.rank}'s status channel carried {what}; only the harness "
                                      "writes there", rank=state.rank)

    def _drain(self, selector: selectors.BaseSelector) -> None:
        """Read whatever is already in the pipes, without waiting."""
        for _ in range(64):
            if not selector.select(timeout=0):
                return
            self._read(selector, 0)

    def _box_events(self, selector: selectors.BaseSelector, box: Any, now: float) -> None:
        exited = False
        for event in box.events():
            if event["event"] == "limit" and self.limit is None:
                self.limit = event
                self.first_problem_at = self.first_problem_at or now
            elif event["event"] == "lost":
                for state in self.ranks:
                    if state.returncode is None:
                        state.returncode = -signal.SIGKILL
                exited = True
            elif event["event"] == "exit":
                self.ranks[event["rank"]].returncode = event["code"]
                exited = True
        if exited:
            self._drain(selector)  # a rank's last words before judging its exit

    def _limit(self, state: RankState) -> float:
        if not state.started:
            return self.limits.startup_s
        return max(self.timing_s, self.limits.step_s) if state.timing else self.limits.step_s

    def _on_event(self, state: RankState, event: dict[str, Any]) -> None:
        # The pipe says which rank wrote, not the message: candidate code shares the process.
        event["rank"] = state.rank
        kind = event.get("event")
        if event.pop("token", None) != self.token:
            # Stray or forged writes prove nothing; on a judged side they end it (_stray_line).
            if kind == "garbage":
                self._stray_line(state, f"{str(event.get('raw', ''))[:60]!r} (not a message)")
            else:
                self._stray_line(state, f"a {str(kind)[:40]!r} message without the channel's token")
            return
        if kind not in (READY, STEP, TIMES, WAITING, DONE, ERROR, BUILD, BUILT, CALLED):
            return
        if kind == CALLED:
            # Only the judge acts on it (it releases the next call's inputs); a claim proves
            # nothing and extends no deadline: the judge copies the call's outputs as it stands.
            if self.buffers is not None:
                # Claims are kept until the judge looks, which it does only while a block runs:
                # the harness sends one after each call of a block but its last, and none at any
                # other time. Claims at the start or the finish piled up in the judge's memory for
                # as long as those last (red team, floods_call_claims: 284 MiB in 15 s).
                if state.calls_left <= 0 or event.get("block") != self.last_block:
                    self._stray_line(state, "a 'called' message for no call of the block the judge sent")
                    return
                state.calls_left -= 1
            # Judged in the ranks (driven, no buffers) no one takes claims: kept, they piled up for
            # the whole evaluation (red team, ninth pass; floods_call_claims outside).
            if self.buffers is not None and isinstance(event.get("block"), int) and isinstance(event.get("call"), int):
                self.called.append((state.rank, event["block"], event["call"]))
                if event["block"] == self.last_block:
                    state.claimed += 1
            return
        now = state.last_progress = time.monotonic()
        if kind in (BUILD, BUILT):
            self._on_build(state, kind, now)
            return
        if kind == DONE and self.job.get("driven") and not self.finishing:
            # A driven rank is done only after the judge's finish. Said sooner, then an exit with
            # status 0, it passed for finished: the judge stopped checking the side's deadlines
            # and waited for ever for an answer no process was left to give (red team,
            # says_done_and_leaves; judged in the ranks too, ninth pass: no verdict in 120 s). A
            # judged side ends for it; in the ranks it is not kept, and the exit is a crash.
            self._stray_line(state, "a 'done' message before the judge's finish")
            return
        self._report_progress(state, event)
        if kind == READY:
            state.started = True
            self.ready[state.rank] = event
        elif kind == STEP:
            if self.buffers is not None and self.side == "candidate":
                self._stray_line(state, "a 'step' message, which a judged candidate's harness never sends")
                return
            if len(state.labels) >= MAX_LABELS:
                return  # what a rank can make us keep is bounded; a real run stays far below
            # A step's label of at most MAX_LABEL_CHARS: judged in the ranks a candidate's steps are
            # kept, and 4096 labels of a 1 MiB line each were 4 GiB of our memory (ninth pass).
            state.labels.append(f"{str(event.get('task'))[:40]}:{str(event.get('step'))[:MAX_LABEL_CHARS]}")
            # Fingerprints are how `pkb check-references` compares references (suite.py): a
            # candidate's would be memory it makes us keep for nothing.
            if isinstance(event.get("fingerprints"), list) and self.side == "reference":
                self.fingerprints[(int(event.get("task") or 0), str(event.get("step")), state.rank)] = \
                    event["fingerprints"]
            state.timing = bool(event.get("timing"))
        elif kind == WAITING:
            if self.job.get("driven") and state.commanded:
                # A driven rank says it waits once, before the judge's first command; said later it
                # cleared the deadline of the command it was working on, and a rank that then slept
                # was held only by the side's whole allowance (red team, waits_out_the_finish: 60 s
                # under a 3 s step limit, 15 minutes under the defaults; judged in the ranks too,
                # ninth pass). A judged side ends for it; in the ranks it is not kept.
                self._stray_line(state, "a 'waiting' message after the judge's first command (the harness "
                                 "says it once, when it is ready)")
                return
            state.waiting, state.deadline = True, None
        elif kind == TIMES and self.job.get("driven"):
            block = event.get("block")
            if block != self.last_block or not state.commanded:
                # An answer to a block the judge did not send last clears no deadline: judged in
                # the ranks it is not kept either (before, a forged one at the finish held the
                # judge to the side's whole allowance there too; ninth pass).
                self._stray_line(state, f"an answer to block {str(block)[:20]}, which the judge did not send")
                return
            key = (block, state.rank)
            if key in self.blocks:
                # The harness answers each block once: a second answer was written by something
                # else that holds the channel (candidate code, token from memory). An answer
                # clears the rank's deadline, and a second one to the last block, sent at the
                # finish, held the judge to the side's whole allowance (red team,
                # waits_out_the_finish): judged, it ends the side now; in the ranks it is kept to
                # be reported (answered_twice) and clears nothing.
                if len(self.duplicate_blocks) < MAX_KEPT:
                    self.duplicate_blocks.append(key)
                self._stray_line(state, f"an answer to block {block} twice (the harness answers each "
                                 "block once)")
                return
            # A judged side's answer says only that the block is done: keep nothing of it. Judged in
            # the ranks, only what PairedTimer reads of it (a rank's answer may carry up to 1 MiB of
            # anything else, and every block's was kept until the end).
            self.blocks[key] = {"block": block} if self.buffers is not None else \
                {name: event[name] for name in BLOCK_ANSWER_FIELDS if name in event}
            if state.answered_after is None:
                # The harness answers after its last call, so after a "called" for every call but
                # the last: an answer that comes sooner in the stream was not the harness's.
                state.answered_after = state.claimed
            state.waiting, state.deadline = True, None
            # The task is the rank's word: a label of its first 40 characters, and no more labels
            # than a real run writes (red team, floods_block_answers: 600 answers to one block,
            # each naming a new task of half a MiB, were all kept while the peer held it open).
            label = f"{str(event.get('task'))[:40]}:timing"
            if label not in state.labels and len(state.labels) < MAX_LABELS:
                state.labels.append(label)
        elif kind == TIMES:
            state.timing = False
            self.times[(int(event.get("task") or 0), state.rank)] = event
            state.labels.append(f"{event.get('task')}:timing")
        elif kind == DONE:
            # Finished only once the process has also exited cleanly (see poll).
            self.done[state.rank] = event
        elif kind == ERROR:
            if len(self.errors) < MAX_KEPT:
                self.errors.append(event)
            self.first_problem_at = self.first_problem_at or time.monotonic()

    def _on_build(self, state: RankState, kind: str, now: float) -> None:
        """A build's time is ours to measure: the rank only says when it starts and ends."""
        if kind == BUILD and state.building_since is None:
            state.building_since = now
        elif kind == BUILT and state.building_since is not None:
            state.build_s += now - state.building_since
            state.building_since = None
            self.build_ended_at = now

    def _report_progress(self, state: RankState, event: dict[str, Any]) -> None:
        """Rank 0's steps; in a driven timed phase, its start once (not every block)."""
        kind = event.get("event")
        if self.on_progress is None or state.rank != 0:
            return
        if self.buffers is not None and self.side == "candidate" and kind not in (READY, DONE):
            return  # a judged candidate's steps are the judge's to announce, not its own words
        if (kind == READY and state.started) or (kind == DONE and state.rank in self.done) or \
                (kind == STEP and len(state.labels) >= MAX_LABELS):
            # The harness says each of these once (steps: no more than it keeps); repeats sent with
            # the token became a line each on `pkb eval --progress`'s output and in a worker's log
            # (red team, floods_progress_lines: 200,000 in one trial).
            return
        if kind == WAITING and not state.timing_announced:
            state.timing_announced = True
            self.on_progress(self.side, progress_event(STEP, {"step": "timing started", "task": event.get("task")}))
        elif kind in (READY, STEP, DONE) or (kind == TIMES and not self.job.get("driven")):
            self.on_progress(self.side, progress_event(kind, event))


def box_dir(workdir: Path, side: str) -> Path:
    """The folder a side's box is made in (its inbox, and unconfined its work folder), made when
    the side starts."""
    return workdir / f"{side}-box"


def progress_event(kind: str, event: dict[str, Any]) -> dict[str, Any]:
    """What the progress hook gets of a rank's message: its step as short text, its task as a
    whole number, nothing else. Candidate code can send the first "ready" (and "done") in the
    harness's name, and its step went to the hook as sent: a list nested just short of the depth
    the judge's parser refuses was one that `pkb eval --progress`, encoding it a few frames deeper,
    could not (RecursionError: a traceback and no report instead of a verdict; red team,
    nests_its_ready_step)."""
    step, task = event.get("step"), event.get("task")
    return {"event": kind, "step": step[:MAX_STEP_CHARS] if isinstance(step, str) else None,
            "task": task if type(task) is int else None}


def run_side(job: RankJob, workdir: Path, limits: Limits, timing_s: float,
             on_progress: Optional[ProgressHook] = None, *, sandbox: bool = True,
             resources: Optional[ResourceLimits] = None, salts: Optional[list[str]] = None,
             seed_secret: str = "") -> SideResult:
    """Run one side. Its outputs land in ``job["out_dir"]`` once every process of the side is gone."""
    return SideRun(job, workdir, limits, timing_s, on_progress, sandbox=sandbox, resources=resources,
                   salts=salts, seed_secret=seed_secret).run()
