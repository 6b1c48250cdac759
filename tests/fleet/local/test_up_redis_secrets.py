"""``fleet up --redis URL`` with a password (and TLS where redis-server has it): the whole fleet
comes up on it, and neither its output, nor any child's log, nor any child's command line shows
the password (the children get the URL in their environment)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import _require_redis_server
from tests.support.redis_server import RedisServer, TLSUnsupported

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
PASSWORD = "up-Pw-41d8/c9@x"
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


@pytest.fixture
def secret_redis(tmp_path: Path) -> Iterator[RedisServer]:
    _require_redis_server()
    server = RedisServer(tmp_path / "redis", password=PASSWORD, tls=True)
    (tmp_path / "redis").mkdir(exist_ok=True)
    try:
        server.start()
    except TLSUnsupported as error:
        if IN_CI:
            raise
        pytest.skip(f"redis-server here has no TLS: {error}")
    yield server
    server.stop()


def _command_lines(pids: set[int]) -> dict[int, str]:
    lines = {}
    for pid in pids:
        try:
            lines[pid] = (
                Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            )
        except OSError:
            continue
    return lines


def _descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_fleet_up_on_a_redis_with_a_password_and_tls_never_shows_the_password(
    secret_redis: RedisServer, tmp_path: Path
) -> None:
    kubeconfig, state_dir, output = tmp_path / "fleet.kubeconfig", tmp_path / "state", tmp_path / "up.out"
    with output.open("wb") as out:
        process = subprocess.Popen(
            [
                sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')",
                "up", "--redis", secret_redis.url,
                "--kubeconfig", str(kubeconfig), "--state-dir", str(state_dir),
            ],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        # The kubeconfig is written once every readiness check passed: Redis answers, the
        # dispatcher leads, a worker listens, the syncer probed every member, the API is ready.
        while not kubeconfig.exists():
            assert process.poll() is None, output.read_text()
            assert time.monotonic() < deadline, output.read_text()
            time.sleep(0.3)
        children = _command_lines(_descendants(process.pid))
        assert any(" worker " in line or line.endswith(" worker") for line in children.values()), children
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    assert code == 0, output.read_text()
    text = output.read_text()
    assert "Fleet is up." in text
    assert f"Redis at rediss://:***@127.0.0.1:{secret_redis.port}/0" in text
    logs = {path.name: path.read_text(errors="replace") for path in (state_dir / "logs").glob("*.log")}
    assert {"api.log", "dispatcher.log", "worker.log", "syncer.log"} <= set(logs), logs
    for name in ("api.log", "dispatcher.log", "worker.log", "syncer.log"):
        assert "redis=rediss://:***@" in logs[name], logs[name]
    everything = "\n".join([text, *logs.values(), *children.values()])
    for secret in (PASSWORD, urllib.parse.quote(PASSWORD, safe=""), "up-Pw-41d8"):
        assert secret not in everything
