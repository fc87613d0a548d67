"""A throw-away PostgreSQL server for the tests: Debian's ``postgresql`` binaries, a fresh cluster in a
temporary folder, listening on a free loopback port (and a Unix socket in that folder), stopped and removed
afterwards.

``initdb`` and ``postgres`` refuse to run as root; as root (CI) they run as the ``postgres`` user that
Debian's package creates, through ``runuser``. The cluster has one superuser, ``kgagents``, with a password
for TCP connections, so the tests also see how URLs with passwords are handled.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

USER = "kgagents"
PASSWORD = "crash-test-password"
DATABASE = "postgres"


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on ``PATH``, else Debian's newest
    ``/usr/lib/postgresql/<version>/bin``."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
    for folder in reversed(folders):
        if (Path(folder) / "initdb").exists() and (Path(folder) / "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    """One cluster and its server process; :meth:`start` returns its URL once it accepts connections."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.owner: pwd.struct_passwd | None = None
        if os.geteuid() == 0:
            try:
                self.owner = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise RuntimeError("as root, the PostgreSQL server runs as the `postgres` user that Debian's "
                                   "postgresql package creates; there is none") from exc
        self.root = Path(tempfile.mkdtemp(prefix="kgagents-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()

    @property
    def url(self) -> str:
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{DATABASE}"

    def _give(self, path: Path) -> None:
        if self.owner:
            os.chown(path, self.owner.pw_uid, self.owner.pw_gid)

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        if self.owner:
            command = ["runuser", "-u", self.owner.pw_name, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{program} failed ({done.returncode}): {done.stderr[-2000:]}\n{tail}")

    def start(self) -> str:
        self._give(self.root)
        password_file = self.root / "password"
        password_file.write_text(PASSWORD, encoding="utf-8")
        self._give(password_file)
        self._run("initdb", "-D", str(self.data), "-U", USER, f"--pwfile={password_file}", "--no-sync",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C")
        options = f"-p {self.port} -k {self.root} -h 127.0.0.1 -c fsync=off -c full_page_writes=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options, "-w",
                  "-t", "60", "start")
        return self.url

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
