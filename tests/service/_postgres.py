"""A throwaway PostgreSQL 15 server for the service tests (one per session, loopback only).

The server runs from a temporary directory: data directory, Unix socket and
log. It listens on 127.0.0.1 on a free port, trusts connections from loopback
and its private socket (no password), except for the members of
:data:`PASSWORD_GROUP`, who must give their password (SCRAM-SHA-256:
:meth:`PostgresServer.create_password_user`), and keeps ``fsync`` and
``synchronous_commit`` on, so the durability the stores promise is real.
PostgreSQL refuses to run as root: as root, ``initdb`` and ``pg_ctl`` run as
the unprivileged user ``nobody`` (via ``runuser`` or ``setpriv``) on a
directory chowned to it.

The server is a daemon (``pg_ctl start``), so it does not end with the
session by itself: the session fixture stops it, an ``atexit`` hook stops it if
the fixture could not, and a server whose session was killed (``kill -9``)
is stopped by the next :func:`start_postgres`, which finds its directory (the
file ``owner`` names the session's process and its start time).
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

#: The bootstrap superuser of the test server.
SUPERUSER = "postgres"
#: Members of this role log in with a password over TCP (everyone else is trusted).
PASSWORD_GROUP = "password_login"
_UNPRIVILEGED = "nobody"
_PREFIX = "shuffledp-pg-"


class PostgresStartError(Exception):
    """The test server could not be started (the message says why)."""


def _binary(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/local/bin")
    if found is None:
        candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
        found = candidates[-1] if candidates else None
    if found is None:
        raise PostgresStartError(f"{name} not found (on PATH, /usr/local/bin, /usr/lib/postgresql)")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as_prefix() -> tuple[list[str], int | None, int | None]:
    """The command prefix that drops root, and the uid/gid to chown the directory to."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        user = pwd.getpwnam(_UNPRIVILEGED)
    except KeyError:
        raise PostgresStartError(
            f"running as root and there is no user {_UNPRIVILEGED!r} to run PostgreSQL as"
        ) from None
    if shutil.which("runuser"):
        return ["runuser", "-u", _UNPRIVILEGED, "--"], user.pw_uid, user.pw_gid
    if shutil.which("setpriv"):
        prefix = [
            "setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--",
        ]  # fmt: skip
        return prefix, user.pw_uid, user.pw_gid
    raise PostgresStartError("running as root and neither runuser nor setpriv is available")


@dataclass
class PostgresServer:
    """A running test server."""

    base: Path
    port: int
    prefix: list[str]
    env: dict[str, str]
    host: str = "127.0.0.1"

    @property
    def datadir(self) -> Path:
        return self.base / "data"

    @property
    def log_path(self) -> Path:
        return self.base / "server.log"

    def url(self, dbname: str = "postgres") -> str:
        """The URL of one database, as the superuser over TCP on loopback."""
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/{dbname}"

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[Any]:
        """An autocommit superuser connection (close it, or use it in ``with``)."""
        return psycopg.connect(self.url(dbname), autocommit=True, connect_timeout=10)

    def create_database(self, owner: str | None = None) -> str:
        """Create an empty database (owned by ``owner`` if given); return its superuser URL."""
        name = f"shuffledp_{uuid.uuid4().hex[:16]}"
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if owner is not None:
            statement += sql.SQL(" OWNER {}").format(sql.Identifier(owner))
        with self.connect() as conn:
            conn.execute(statement)
        return self.url(name)

    def create_password_user(self, password: str) -> str:
        """Create a login role that must give ``password`` over TCP; return its name."""
        name = f"user_{uuid.uuid4().hex[:12]}"
        with self.connect() as conn:
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE {}").format(
                    sql.Identifier(name), sql.Literal(password), sql.Identifier(PASSWORD_GROUP)
                )
            )
        return name

    def block(self, dbname: str) -> None:
        """Make a database unavailable: refuse new connections, end the open ones."""
        with self.connect() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS false").format(sql.Identifier(dbname))
            )
            self.terminate(dbname, conn)

    def unblock(self, dbname: str) -> None:
        """Accept connections to a database again."""
        with self.connect() as conn:
            conn.execute(
                sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS true").format(sql.Identifier(dbname))
            )

    def terminate(self, dbname: str, conn: psycopg.Connection[Any] | None = None) -> int:
        """End every session connected to a database (as a server restart would)."""
        with contextlib.ExitStack() as stack:
            if conn is None:
                conn = stack.enter_context(self.connect())
            rows = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            ).fetchall()
        return len(rows)

    @contextlib.contextmanager
    def setting(self, name: str, value: str) -> Iterator[None]:
        """Change a server setting (``ALTER SYSTEM``, reload) for the ``with`` block."""
        self._set(name, value)
        try:
            yield
        finally:
            self._set(name, None)

    def _set(self, name: str, value: str | None) -> None:
        with self.connect() as conn:
            if value is None:
                conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("ALTER SYSTEM SET {} = {}").format(
                        sql.Identifier(name), sql.Literal(value)
                    )
                )
            conn.execute("SELECT pg_reload_conf()")
            (default,) = conn.execute(
                "SELECT boot_val FROM pg_settings WHERE name = %s", (name,)
            ).fetchone() or (None,)
        expected = default if value is None else value
        deadline = time.monotonic() + 10
        while True:  # new sessions see the change once the postmaster has reloaded
            with self.connect() as conn:
                (now,) = conn.execute("SELECT current_setting(%s)", (name,)).fetchone() or (None,)
            if now == expected:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{name} is still {now}, expected {expected}")
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (immediate: nothing is kept) and remove its directory (idempotent)."""
        _stop_server(self.base, self.prefix, self.env)


def _stop_server(base: Path, prefix: list[str], env: dict[str, str]) -> None:
    if (base / "data" / "postmaster.pid").exists():
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [*prefix, _binary("pg_ctl"), "-D", str(base / "data"), "-m", "immediate", "-w",
                 "-t", "60", "stop"],
                env=env, cwd=base, capture_output=True, check=False, timeout=90,
            )  # fmt: skip
    shutil.rmtree(base, ignore_errors=True)


def _process_start(pid: int) -> str | None:
    """The start time of a process (``/proc/PID/stat`` field 22), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_line() -> str:
    return f"{os.getpid()} {_process_start(os.getpid())}\n"


def stop_orphaned_servers(prefix: list[str], env: dict[str, str]) -> list[Path]:
    """Stop the test servers whose session's process is gone (it was killed); return their dirs.

    A server of a session that still runs (someone else's tests) is left alone.
    """
    stopped = []
    for base in Path(tempfile.gettempdir()).glob(f"{_PREFIX}*"):
        try:
            pid_text, started = (base / "owner").read_text().split()
        except (OSError, ValueError):
            continue  # being created, or not ours
        if _process_start(int(pid_text)) == started:
            continue  # its session still runs
        _stop_server(base, prefix, env)
        stopped.append(base)
    return stopped


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return " | ".join(text.strip().splitlines()[-lines:])


def start_postgres(attempts: int = 3) -> PostgresServer:
    """Initialise and start a server in a new temporary directory.

    Raises:
        PostgresStartError: With the reason (the tool's output or the server log).
    """
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    prefix, uid, gid = _run_as_prefix()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env["LC_ALL"] = "C"
    stop_orphaned_servers(prefix, env)
    base = Path(tempfile.mkdtemp(prefix=_PREFIX))
    server = PostgresServer(base, 0, prefix, env)
    try:
        (base / "owner").write_text(_owner_line())
        if uid is not None and gid is not None:
            os.chown(base, uid, gid)
        datadir = base / "data"
        done = subprocess.run(
            [*prefix, initdb, "-D", str(datadir), "-U", SUPERUSER, "--auth=trust",
             "-E", "UTF8", "--no-locale", "--no-instructions"],
            env=env, cwd=base, capture_output=True, text=True, check=False, timeout=120,
        )  # fmt: skip
        if done.returncode != 0:
            output = " | ".join((done.stdout + done.stderr).strip().splitlines()[-15:])
            raise PostgresStartError(f"initdb failed (exit {done.returncode}): {output}")
        (datadir / "pg_hba.conf").write_text(
            "local all all trust\n"
            f"host all +{PASSWORD_GROUP} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
        )
        base_conf = (datadir / "postgresql.conf").read_text()
        for _ in range(attempts):
            port = _free_port()
            settings = (
                f"\nlisten_addresses = '127.0.0.1'\nport = {port}\n"
                f"unix_socket_directories = '{base}'\n"
                "fsync = on\nsynchronous_commit = on\nshared_buffers = 32MB\n"
                "max_connections = 200\n"
            )
            (datadir / "postgresql.conf").write_text(base_conf + settings)
            server = PostgresServer(base, port, prefix, env)
            done = subprocess.run(
                [*prefix, pg_ctl, "-D", str(datadir), "-l", str(server.log_path), "-w",
                 "-t", "60", "start"],
                env=env, cwd=base, capture_output=True, text=True, check=False, timeout=90,
            )  # fmt: skip
            if done.returncode == 0:
                try:
                    with server.connect() as conn:
                        conn.execute(
                            sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(PASSWORD_GROUP))
                        )
                except psycopg.Error as exc:
                    raise PostgresStartError(
                        f"server started but refuses connections: {exc}"
                    ) from None
                atexit.register(server.stop)  # if the session fixture could not
                return server
            if "could not bind" not in _tail(server.log_path, 50):
                break  # not a port race: retrying will not help
        raise PostgresStartError(
            f"pg_ctl start failed (exit {done.returncode}): {done.stderr.strip()} "
            f"log: {_tail(base / 'server.log')}"
        )
    except PostgresStartError:
        server.stop()  # a server that did start (pg_ctl timed out, refuses connections) ends
        raise
    except (OSError, subprocess.SubprocessError) as exc:
        server.stop()
        raise PostgresStartError(f"{type(exc).__name__}: {exc}") from None
    except BaseException:  # interrupted while starting
        server.stop()
        raise
