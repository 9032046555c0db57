"""The embedded SQLite default takes several writers at once without a 503.

On a GPU host a board batch's run import got "the portal's database is unreachable" (HTTP 503)
because SQLite answered "database is locked" the moment the two workers' callbacks held the write
lock. With the local settings a writer now waits for the lock instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A second connection writes while the first is inside a transaction for 1.5 s; both must
# succeed, the second after waiting.
SCRIPT = textwrap.dedent("""
    import threading, time
    import django
    django.setup()
    from django.db import connection, connections, transaction
    with connection.cursor() as c:
        c.execute("CREATE TABLE t (x integer)")
        c.execute("PRAGMA journal_mode")
        print("journal", c.fetchone()[0])
    held = threading.Event()
    def hold_the_lock():
        # A transaction that reads first and writes later (as a view that checks, then stores):
        # begun as a reader, SQLite cannot upgrade it once another connection has written, and
        # answers "database is locked" at once, whatever the busy timeout.
        with transaction.atomic():
            with connection.cursor() as c:
                c.execute("SELECT count(*) FROM t")
                held.set()
                time.sleep(1.5)
                c.execute("INSERT INTO t VALUES (1)")
        connections.close_all()
    failed = []
    def hold_the_lock_or_record():
        try:
            hold_the_lock()
        except Exception as error:
            failed.append(repr(error))
    holder = threading.Thread(target=hold_the_lock_or_record)
    holder.start()
    held.wait()
    start = time.monotonic()
    with transaction.atomic():
        with connection.cursor() as c:
            c.execute("INSERT INTO t VALUES (2)")
    print("waited", round(time.monotonic() - start, 2))
    holder.join()
    assert not failed, failed
    with connection.cursor() as c:
        c.execute("SELECT count(*) FROM t")
        print("rows", c.fetchone()[0])
""")


def test_a_second_writer_waits_for_the_lock_instead_of_failing(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.local",
           "PKB_VAR_DIR": str(tmp_path), "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}"}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in done.stdout.split("\n") if line)
    assert lines["journal"] == "wal"
    assert float(lines["waited"]) >= 1.0  # it waited for the holder, then wrote
    assert lines["rows"] == "2"
