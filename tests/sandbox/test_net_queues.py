"""Socket queues from a namespace's /proc/net tables (evaluator/sandbox/net_queues.py), as the
side's memory watch and the judge's TCP check read them."""

from __future__ import annotations

from evaluator.sandbox.net_queues import queued_per_socket

HEADER = b"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"


def _line(state: str, tx: int, rx: int) -> bytes:
    return f"   0: 0100007F:1F90 0100007F:C350 {state} {tx:08X}:{rx:08X} 00:00000000 00000000  1000 0 1\n".encode()


def test_queues_are_read_per_socket_and_listening_sockets_left_out(tmp_path):
    (tmp_path / "tcp").write_bytes(HEADER + _line("01", 4096, 100) + _line("0A", 7, 9) + _line("01", 0, 0))
    (tmp_path / "udp").write_bytes(HEADER + _line("07", 0, 3 << 20))
    queues, lines, too_many = queued_per_socket(str(tmp_path), ("tcp", "tcp6", "udp"), limit=100)
    assert queues == [4196, 0, 3 << 20] and lines == 4 and not too_many  # tcp6 missing: skipped


def test_past_the_limit_the_rest_is_left_unread(tmp_path):
    (tmp_path / "tcp").write_bytes(HEADER + _line("01", 1, 1) * 5)
    queues, lines, too_many = queued_per_socket(str(tmp_path), ("tcp",), limit=3)
    assert queues == [2, 2, 2] and lines == 4 and too_many


def test_a_table_that_does_not_parse_gives_what_was_read_of_it(tmp_path):
    (tmp_path / "tcp").write_bytes(HEADER + _line("01", 1, 1) + b"   1: x y 01 zz:yy\n" + _line("01", 5, 5))
    (tmp_path / "udp").write_bytes(HEADER + _line("07", 0, 8))
    queues, _, _ = queued_per_socket(str(tmp_path), ("tcp", "udp"), limit=100)
    assert queues == [2, 8]
