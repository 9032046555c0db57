"""The judge's quiet-GPU check, with a stand-in for its probe kernel (no GPU here)."""

from __future__ import annotations

from evaluator.judge.quiet import FLOOR_S, DeviceQuiet


class Probes:
    """Each device answers idle (20 us) unless told it has ``busy`` probes' worth of work left."""

    def __init__(self) -> None:
        self.busy = {0: 0, 1: 0}
        self.calls = 0

    def __call__(self, device: int) -> float:
        self.calls += 1
        if self.busy[device] > 0:
            self.busy[device] -= 1
            return 3e-3  # a time slice of someone else's work
        return 2e-5


def test_an_idle_gpu_is_quiet_at_the_first_probe():
    probes = Probes()
    quiet = DeviceQuiet([0, 1], probe=probes)
    assert quiet.limit_s[0] == max(10 * 2e-5, FLOOR_S)
    before = probes.calls
    assert quiet.wait(within_s=1.0) is None
    assert probes.calls - before == 2  # one probe per GPU


def test_work_left_in_flight_is_waited_for_then_quiet():
    probes = Probes()
    quiet = DeviceQuiet([0, 1], probe=probes)
    probes.busy[1] = 5
    assert quiet.wait(within_s=1.0) is None
    assert probes.busy[1] == 0  # it kept probing until the work was gone


def test_work_that_never_ends_names_the_busy_gpu():
    probes = Probes()
    quiet = DeviceQuiet([0, 1], probe=probes)
    probes.busy[0] = 10**9
    assert quiet.wait(within_s=0.05) == 0
