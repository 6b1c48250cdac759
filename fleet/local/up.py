"""``fleet up``: the whole fleet on one machine, in the foreground, until Ctrl-C or SIGTERM.

What runs, in start order (see :mod:`fleet.local` for why each is a process of its own):

1. Redis: the one given with ``--redis``, or an embedded one (:mod:`~fleet.local.embedded`).
2. The simulated members (``fleet sim``, the topology's members in one process); they write the
   members' kubeconfig once every port listens.
3. The roles, with that kubeconfig: ``fleet syncer``, ``fleet worker``, ``fleet dispatcher``, and
   ``fleet api`` over HTTPS on ``--port`` (a free port when 0) with a token file holding one admin
   token and a certificate of this run's own CA (see :mod:`~fleet.local.tls` for why HTTPS); the
   API serves the fleet console at ``/console/``, whose URL is printed with the API's.
4. When every check of :mod:`~fleet.local.readiness` passes: the kubeconfig (``fleet`` current,
   the members copied, see :mod:`~fleet.local.kubeconfig`), ``prometheus.yml`` with this run's
   scrape targets, and what to try next, printed.

Then it supervises: a role that exits is restarted (a few times a minute at most: each role's
state is in Redis or the members, so a restart loses nothing); Redis or the members exiting ends
the run, since their state would be gone. Stopping goes in the reverse order: the API and the
roles together, then the members, then Redis, each SIGTERM and then SIGKILL after a timeout, so
nothing is left running and no port stays bound. The kubeconfig is removed again: it would point
at ports nobody serves.
"""

from __future__ import annotations

import csv
import secrets
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import redis
import yaml

from fleet.connections import mask_url
from fleet.local.children import Child, fleet_command, free_port, stop_all
from fleet.local.embedded import EmbeddedRedis, start_embedded_redis, wait_for_redis
from fleet.local.kubeconfig import TENANT, TENANT_NAMESPACE, fleet_kubeconfig, remove_own, remove_stale
from fleet.local.layout import Layout
from fleet.local.readiness import (
    Check,
    api_ready,
    dispatcher_leads,
    members_probed,
    pending,
    redis_answers,
    worker_listens,
)
from fleet.local.resumed import resumed_state
from fleet.local.tls import make_certificates
from fleet.sim import CONTROL_EXTENSION, DEFAULT_TOPOLOGY, load_topology, write_atomically

__all__ = ["LocalFleet", "UpError", "UpSettings", "next_steps"]

#: The roles, in start order; stopped together.
ROLES: Final = ("syncer", "worker", "dispatcher", "api")
_ADMIN_GROUP: Final = "fleet:admins"
_ADMIN_USER: Final = "fleet-admin"
_POLL: Final = 0.2


class UpError(RuntimeError):
    """``fleet up`` cannot start or keep running; the message says why (and shows the log lines)."""


@dataclass(frozen=True)
class UpSettings:
    kubeconfig: Path = Path("fleet.kubeconfig")
    redis_url: str | None = None
    topology: Path | None = None
    port: int = 0
    state_dir: Path = Path(".fleet")
    fresh: bool = False
    ready_timeout: float = 120.0
    host: str = "127.0.0.1"
    log_level: str = "info"
    #: Overrides the topology's ``jobDurationSeconds`` (None: the topology's own value).
    job_seconds: float | None = None


@dataclass
class Endpoints:
    """Where this run's processes listen (for the summary and ``prometheus.yml``)."""

    redis_url: str = ""
    redis_description: str = ""
    api_url: str = ""
    control_url: str = ""
    members: list[str] = field(default_factory=list)
    metrics: dict[str, str] = field(default_factory=dict)


def runnable_fleet() -> str:
    """How to run ``fleet`` from here, as a user types it: ``fleet`` when that is the one on PATH,
    else the virtualenv's (``.venv/bin/fleet`` relative to the current directory when inside it):
    ``make up`` does not put the virtualenv on PATH."""
    import os
    import shutil
    import sys

    own = Path(sys.executable).parent / "fleet"
    if not own.exists():
        return "fleet"
    on_path = shutil.which("fleet")
    if on_path is not None and Path(on_path).resolve() == own.resolve():
        return "fleet"
    try:
        return os.path.relpath(own) if own.resolve().is_relative_to(Path.cwd().resolve()) else str(own)
    except ValueError:
        return str(own)


def next_steps(kubeconfig: Path) -> str:
    """What to try first: the README walkthrough's opening commands."""
    fleet = runnable_fleet()
    return "\n".join(
        [
            "Try next (README.md, Walkthrough), from the repository root in another terminal:",
            f"  export KUBECONFIG={kubeconfig.resolve()}",
            "  kubectl get --raw /readyz",
            "  kubectl apply -f config/samples/elasticquotatree.yaml",
            "  kubectl apply -f config/samples/pytorch_multinodes_acjob_910b.yaml",
            "  kubectl get acjob -w                    # Running on member-2, the one with card-910b-2 nodes",
            "  kubectl --context member-2 get acjob    # the copy on the member",
            "  kubectl --context team-a get acjob      # the same fleet as a tenant of namespace default",
            f"  {fleet} sim fault member-2 down   # and watch the failover",
            "Ctrl-C stops everything.",
        ]
    )


class LocalFleet:
    """One run of ``fleet up``: :meth:`run` starts, announces, supervises and stops everything."""

    def __init__(self, settings: UpSettings, echo: Callable[[str], None] = print) -> None:
        self.settings = settings
        self.echo = echo
        self.layout = Layout(settings.state_dir)
        self.endpoints = Endpoints()
        self.redis: EmbeddedRedis | None = None
        self.sim: Child | None = None
        self.roles: dict[str, Child] = {}
        self.token = secrets.token_urlsafe(24)
        self.tenant_token = secrets.token_urlsafe(24)
        self.ready = threading.Event()
        self.certificates = make_certificates(settings.host)

    # ---- the run ---------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Start, wait until ready, supervise until ``stop`` is set; always stop what it started.

        Raises :class:`UpError` when something cannot start or dies for good.
        """
        topology = load_topology(self.settings.topology)  # a bad file fails before anything runs
        self.endpoints.members = [m.name for m in topology.members]
        with ExitStack() as stack:
            stack.enter_context(self.layout.lock())
            remove_stale(self.settings.kubeconfig)
            self.layout.prepare(fresh=self.settings.fresh)
            stack.callback(self._stop)
            self._start_redis()
            self._record_redis()
            self._report_state()
            if stop.is_set():
                return
            self._start_sim(stop)
            if stop.is_set():
                return
            self._start_roles()
            if not self._wait_ready(stop):
                return
            self._announce()
            self._supervise(stop)

    def _start_redis(self) -> None:
        if self.settings.redis_url:
            url = self.settings.redis_url
            try:
                wait_for_redis(url, 10.0)
            except RuntimeError as error:
                raise UpError(str(error)) from None
            self.endpoints.redis_url = url
            self.endpoints.redis_description = f"Redis at {mask_url(url)} (given with --redis)"
            self.echo(f"redis      {self.endpoints.redis_description}")
            return
        try:
            self.redis = start_embedded_redis(self.layout.redis, self.layout.log("redis"), self.settings.host)
        except RuntimeError as error:
            raise UpError(str(error)) from None
        self.endpoints.redis_url = self.redis.url
        self.endpoints.redis_description = self.redis.description
        self.echo(f"redis      {self.redis.description}")

    def _record_redis(self) -> None:
        """The Redis URL in the state directory, owner-only, for the admin commands run here."""
        path = self.layout.redis_url
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(self.endpoints.redis_url + "\n")

    def _report_state(self) -> None:
        """Say whether the run resumed an earlier run's state, and how much (issue 33, req. 1)."""
        client = redis.Redis.from_url(
            self.endpoints.redis_url, socket_connect_timeout=2.0, socket_timeout=5.0
        )
        try:
            found = resumed_state(client)
        except redis.RedisError as error:
            self.echo(f"state      not counted ({error})")
            return
        finally:
            client.close()
        if self.settings.redis_url:
            hint = "empty the Redis given with --redis"
        else:
            hint = "make up FRESH=1, or fleet up --fresh"
        self.echo(found.describe(hint))

    def _topology_file(self) -> Path:
        """The topology ``fleet sim`` runs: the given one, or a copy with ``--job-seconds`` applied."""
        source = self.settings.topology or DEFAULT_TOPOLOGY
        if self.settings.job_seconds is None:
            return source
        topology = load_topology(source)
        seconds = self.settings.job_seconds
        simulation = topology.simulation.model_copy(update={"job_duration_seconds": seconds})
        derived = topology.model_copy(update={"simulation": simulation})
        write_atomically(self.layout.topology, derived.model_dump(mode="json", by_alias=True))
        return self.layout.topology

    def _start_sim(self, stop: threading.Event) -> None:
        topology = self._topology_file()
        self.sim = Child(
            "sim",
            fleet_command(
                "sim",
                "--topology", str(topology),
                "--kubeconfig", str(self.layout.members_kubeconfig),
                "--host", self.settings.host,
                "--log-level", self.settings.log_level,
            ),
            self.layout.log("sim"),
            critical=True,
        )  # fmt: skip
        self.sim.start()
        deadline = time.monotonic() + 60.0
        while not self.layout.members_kubeconfig.exists():
            if not self.sim.alive:
                raise UpError(
                    f"the simulated members exited with code {self.sim.returncode}:\n{self.sim.tail()}"
                )
            if time.monotonic() > deadline:
                raise UpError(f"the simulated members did not start in 60s:\n{self.sim.tail()}")
            if stop.wait(0.05):
                return
        members = self._members_config()
        self.endpoints.control_url = _control_url(members)
        self.echo(
            f"members    {', '.join(self.endpoints.members)} (fleet sim, "
            f"{topology}; control {self.endpoints.control_url})"
        )

    def _members_config(self) -> dict[str, Any]:
        config = yaml.safe_load(self.layout.members_kubeconfig.read_text())
        return config if isinstance(config, dict) else {}

    def _role_argv(self, role: str) -> list[str]:
        # The Redis URL goes in the environment (``_role_env``), not here: a command line is
        # visible to every user of the machine, and the URL may hold a password.
        common = [
            "--kubeconfig", str(self.layout.members_kubeconfig),
            "--log-level", self.settings.log_level,
        ]  # fmt: skip
        metrics = free_port(self.settings.host)
        self.endpoints.metrics[role] = f"{self.settings.host}:{metrics}"
        common += ["--metrics-port", str(metrics)]
        if role == "api":
            port = self.settings.port or free_port(self.settings.host)
            self.endpoints.api_url = f"https://{self.settings.host}:{port}"
            cert, key = self.certificates.write(self.layout.tls)
            return fleet_command(
                "api", *common,
                "--host", self.settings.host,
                "--port", str(port),
                "--token-file", str(self.layout.tokens),
                "--tls-cert-file", str(cert),
                "--tls-private-key-file", str(key),
            )  # fmt: skip
        return fleet_command(role, *common)

    def _role_env(self) -> dict[str, str]:
        return {"FLEET_REDIS_URL": self.endpoints.redis_url}

    def _start_roles(self) -> None:
        self._write_tokens()
        if self.settings.port:
            _check_port_free(self.settings.host, self.settings.port)
        for role in ROLES:
            child = Child(role, self._role_argv(role), self.layout.log(role), env=self._role_env())
            self.roles[role] = child
            child.start()
        self.echo(f"roles      {', '.join(ROLES)} (logs in {self.layout.logs}/)")

    def _client_context(self) -> ssl.SSLContext:
        """What a client of this run trusts: the run's own CA only."""
        return ssl.create_default_context(cadata=self.certificates.ca.decode())

    def _write_tokens(self) -> None:
        """This run's admin and tenant tokens, and every line a user added to the file before
        (kept: the API reads the file again when it changes, so a token added while the fleet runs
        works at once, and at the next start too)."""
        write_tokens(self.layout.tokens, self.token, self.tenant_token)

    def _checks(self, client: redis.Redis) -> Sequence[Check]:
        return (
            redis_answers(client),
            dispatcher_leads(client),
            worker_listens(client),
            members_probed(client, self.endpoints.members),
            api_ready(self.endpoints.api_url, self.token, context=self._client_context()),
        )

    def _wait_ready(self, stop: threading.Event) -> bool:
        """Supervise while waiting for every check; False when stopped first."""
        client = redis.Redis.from_url(
            self.endpoints.redis_url, socket_connect_timeout=1.0, socket_timeout=2.0
        )
        try:
            checks = self._checks(client)
            deadline = time.monotonic() + self.settings.ready_timeout
            while not stop.is_set():
                self._tend()
                waiting = pending(checks)
                if not waiting:
                    return True
                if time.monotonic() > deadline:
                    raise UpError(
                        f"not ready after {self.settings.ready_timeout:g}s: still waiting for "
                        + "; ".join(waiting)
                        + "\n"
                        + self._tails()
                    )
                stop.wait(_POLL)
            return False
        finally:
            client.close()

    def _announce(self) -> None:
        members = self._members_config()
        write_atomically(self.layout.prometheus, self._prometheus_config())
        write_atomically(
            self.settings.kubeconfig,
            fleet_kubeconfig(
                self.endpoints.api_url,
                self.token,
                members,
                state_dir=self.layout.root,
                ca_data=self.certificates.ca_data,
                tenant_token=self.tenant_token,
            ),
        )
        self.ready.set()
        contexts = ", ".join(
            [
                "fleet (current)",
                f"{TENANT} (a tenant of namespace {TENANT_NAMESPACE})",
                *self.endpoints.members,
            ]
        )
        self.echo(f"fleet API  {self.endpoints.api_url}")
        self.echo(
            f"console    {self.endpoints.api_url}/console/ (sign in with the fleet context's token; "
            "the browser must trust this run's CA, or be told to proceed)"
        )
        self.echo(f"kubeconfig {self.settings.kubeconfig} (contexts {contexts})")
        self.echo(f"metrics    scrape targets in {self.layout.prometheus}")
        self.echo("")
        self.echo("Fleet is up.")
        self.echo(next_steps(self.settings.kubeconfig))

    def _prometheus_config(self) -> dict[str, Any]:
        jobs: list[dict[str, Any]] = []
        for role, target in self.endpoints.metrics.items():
            # Every role, the API included, serves /metrics on a plain loopback port of its own.
            jobs.append(
                {
                    "job_name": f"fleet-{role}",
                    "static_configs": [{"targets": [target], "labels": {"role": role}}],
                }
            )
        if self.endpoints.control_url:
            target = self.endpoints.control_url.split("://", 1)[-1]
            jobs.append(
                {
                    "job_name": "fleet-sim",
                    "static_configs": [{"targets": [target], "labels": {"role": "sim"}}],
                }
            )
        return {"global": {"scrape_interval": "5s"}, "scrape_configs": jobs}

    # ---- supervision -------------------------------------------------------------------------

    def _tend(self) -> None:
        """Restart roles that exited; raise :class:`UpError` when a critical child died."""
        critical = [c for c in (self.sim, getattr(self.redis, "child", None)) if isinstance(c, Child)]
        for child in critical:
            if not child.alive:
                raise UpError(f"{child.name} exited with code {child.returncode}:\n{child.tail()}")
        for child in self.roles.values():
            if child.alive:
                continue
            if not child.may_restart():
                raise UpError(
                    f"{child.name} keeps exiting (code {child.returncode}), not restarting it again:\n"
                    + child.tail()
                )
            self.echo(f"{child.name} exited with code {child.returncode}; restarting it")
            child.start()

    def _supervise(self, stop: threading.Event) -> None:
        while not stop.wait(_POLL):
            self._tend()

    def _tails(self) -> str:
        parts = []
        for child in [*self.roles.values(), self.sim]:
            if child is not None:
                tail = child.tail(8)
                if tail:
                    parts.append(f"--- {child.log_path} ---\n{tail}")
        return "\n".join(parts)

    # ---- stopping ----------------------------------------------------------------------------

    def _stop(self) -> None:
        if self.ready.is_set():
            remove_own(self.settings.kubeconfig)
        self.layout.redis_url.unlink(missing_ok=True)
        stop_all(self.roles.values())
        if self.sim is not None:
            stop_all([self.sim])
        if self.redis is not None:
            self.redis.stop()


#: The first line of the token file: what it is, and that added lines stay.
_TOKENS_HEADER: Final = (
    "# token,user,uid,groups: fleet up rewrites its own two lines (fleet-admin, team-a) on every "
    "start; lines you add stay, and the running API reads them within a second"
)


def write_tokens(path: Path, admin_token: str, tenant_token: str) -> None:
    """The token file: this run's ``fleet-admin`` and ``team-a`` lines, then every other line of
    the file as it was (a user's tokens), owner-only."""
    kept: list[str] = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            cells = next(csv.reader([line]), [])
            if line.startswith("# token,user,uid,groups:"):
                continue
            if len(cells) > 1 and cells[1].strip() in (_ADMIN_USER, TENANT):
                continue
            kept.append(line)
    lines = [
        _TOKENS_HEADER,
        f'{admin_token},{_ADMIN_USER},{_ADMIN_USER},"{_ADMIN_GROUP}"',
        f'{tenant_token},{TENANT},{TENANT},"namespace:{TENANT_NAMESPACE}"',
        *kept,
    ]
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _control_url(members: dict[str, Any]) -> str:
    for cluster in members.get("clusters") or []:
        for extension in (cluster.get("cluster") or {}).get("extensions") or []:
            if extension.get("name") == CONTROL_EXTENSION:
                return str((extension.get("extension") or {}).get("control") or "")
    return ""


def _check_port_free(host: str, port: int) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as error:
            raise UpError(f"--port {port}: cannot listen on {host}:{port}: {error.strerror}") from None
