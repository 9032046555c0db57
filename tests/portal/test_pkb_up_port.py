"""A second `make up` while its port is taken stops before anything starts and says what to do,
instead of printing the "PKB Portal is up" banner and then failing."""

from __future__ import annotations

import io
import socket

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError


def test_a_taken_port_stops_pkb_up_before_the_banner() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = io.StringIO()
        with pytest.raises(CommandError) as refused:
            call_command("pkb_up", "--port", str(port), "--no-worker", stdout=out)
    message = str(refused.value)
    assert f"port {port} on 127.0.0.1 is taken" in message
    assert f"PKB_PORT={port + 1} make up" in message and "Ctrl-C" in message
    assert "PKB Portal" not in out.getvalue()  # no banner, nothing migrated or started


def test_a_port_a_stopped_server_left_in_time_wait_is_free() -> None:
    from portal.submissions.management.commands.pkb_up import check_port_free

    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
        accepted.close()  # the server closes first: its side of the connection is in TIME_WAIT
        client.close()
    check_port_free("127.0.0.1", port)  # raises nothing: runserver could bind here now


def test_the_up_banner_waits_for_the_site_and_is_not_shown_when_it_never_answers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from portal.submissions.management.commands import pkb_up

    clock = iter(range(0, 10_000, 30))
    monkeypatch.setattr(pkb_up.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(pkb_up.time, "sleep", lambda s: None)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # bound, never listening: nothing answers there
        command = pkb_up.Command(stdout=io.StringIO(), stderr=io.StringIO())
        command._announce("127.0.0.1", port, f"http://127.0.0.1:{port}", "")
    assert "is up" not in command.stdout._out.getvalue()
    assert f"nothing answers on http://127.0.0.1:{port}/" in command.stderr._out.getvalue()
