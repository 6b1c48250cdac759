"""``fleet api`` as its own process, for the tests that run it as production does: started over a
real Redis with a token file, asked over HTTP, stopped with SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.net import free_port

#: The admin token every replica started here accepts.
TOKEN = "admin-token-proc-91c3"


@dataclass
class Replica:
    process: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_replica(
    redis_url: str | None, directory: Path, name: str, *extra: str, env: Mapping[str, str] | None = None
) -> Replica:
    """A ``fleet api`` process over ``redis_url`` (None: the one ``env`` gives it in
    ``$FLEET_REDIS_URL``, as a deployment's Secret would), ``extra`` added to its command line;
    it accepts the admin token :data:`TOKEN`. Returns once it answers ``/readyz``."""
    tokens = directory / "tokens.csv"
    tokens.write_text(f'{TOKEN},admin,u-1,"fleet:admins"\n')
    port, metrics_port = free_port(), free_port()
    log_path = directory / f"{name}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                sys.executable, "-c", "from fleet.cli import main; main(prog_name='fleet')",
                "api", *(["--redis", redis_url] if redis_url else []), "--token-file", str(tokens),
                "--port", str(port), "--metrics-port", str(metrics_port), *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        )  # fmt: skip
    replica = Replica(process, port, metrics_port, log_path)
    deadline = time.monotonic() + 30
    while request(replica, "GET", "/readyz", raw=True)[0] != 200:
        assert process.poll() is None, replica.log()
        assert time.monotonic() < deadline, replica.log()
        time.sleep(0.1)
    return replica


def request(
    replica: Replica, method: str, path: str, body: Any = None, *, raw: bool = False, timeout: float = 10
) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(replica.url + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            payload = response.read()
            return response.status, payload if raw else json.loads(payload)
    except urllib.error.HTTPError as error:
        with error:
            payload = error.read()
            return error.code, payload if raw else json.loads(payload or b"null")
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return 0, None


def stop(replica: Replica) -> int:
    if replica.process.poll() is None:
        replica.process.send_signal(signal.SIGTERM)
        try:
            replica.process.wait(15)
        except subprocess.TimeoutExpired:
            replica.process.kill()
            replica.process.wait()
            pytest.fail(f"fleet api did not stop within 15 s of SIGTERM:\n{replica.log()}")
    return int(replica.process.returncode)
