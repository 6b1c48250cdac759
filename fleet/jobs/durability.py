"""When an acknowledged submission is durable: what the API waits for before it answers 201.

Fleet's promise is that an accepted job is never lost, across restarts of Redis too (DESIGN.md,
invariant 4). Redis answers a write once it is in memory; whether it survives a crash then depends
on the server's persistence:

* ``appendfsync always`` (what ``fleet up``'s embedded ``redis-server`` runs with): Redis fsyncs
  the append-only file before it sends the reply, so every acknowledged write survives a crash of
  Redis or of its host. Nothing more is needed: :data:`Durability.mode` ``none``.
* ``appendfsync everysec`` (Redis' default with AOF, cheaper): up to a second of acknowledged
  writes can be lost. The API then waits, on the submission's last write, for
  ``WAITAOF 1 <replicas> <timeout>`` (mode ``aof``, Redis 7.2 or newer): the local AOF fsynced,
  and with ``replicas`` that many replicas' too.
* A primary with replicas (Sentinel): ``WAIT <replicas> <timeout>`` (mode ``replicas``) answers
  once that many replicas have the writes in memory, so a failover to one of them keeps the job;
  it says nothing about fsync (pair it with ``appendfsync always``, or use ``aof`` on 7.2+).

Both commands wait for the writes made *on the connection that asks*. A submission's writes go
over several connections (the object's create on the asyncio client, the queueing on the sync
one), so :meth:`Durability.confirm` sends one marker write and the wait together in one pipeline
(one connection, one round trip): the marker is written after every write of the submission, and
the AOF and the replication stream are ordered, so waiting for the marker waits for them all.

When the wait times out (the fsync or the replicas did not confirm in time) or Redis fails, the
submission is not acknowledged: the API answers 504 ``Timeout`` (the job was stored and may well
survive: Kubernetes' own answer for "may still be processing"; a retry meets ``AlreadyExists``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

import redis

__all__ = ["MODES", "Durability", "DurabilityUnavailable", "NotDurable", "check_server"]

#: The modes, as ``fleet api --durability`` spells them.
MODES: Final = ("none", "aof", "replicas")
Mode = Literal["none", "aof", "replicas"]


class NotDurable(Exception):
    """Redis did not confirm a write's durability in time (or failed while asked)."""


class DurabilityUnavailable(Exception):
    """The Redis server cannot give the durability asked for (too old, AOF off, no replicas)."""


@dataclass(frozen=True)
class Durability:
    #: ``none``: Redis' reply is the acknowledgement (durable with ``appendfsync always``);
    #: ``aof``: ``WAITAOF 1 replicas timeout``; ``replicas``: ``WAIT replicas timeout``.
    mode: Mode = "none"
    #: Replicas that must confirm (``replicas``: at least 1; ``aof``: 0 for the local AOF only).
    replicas: int = 0
    #: How long a submission waits for the confirmation before it is answered 504.
    timeout: float = 1.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"durability mode {self.mode!r}: one of {', '.join(MODES)}")
        if self.mode == "replicas" and self.replicas < 1:
            raise ValueError("durability mode 'replicas' needs at least 1 replica")
        if self.replicas < 0 or self.timeout <= 0:
            raise ValueError("durability: replicas >= 0 and a timeout > 0")

    @property
    def waits(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        if self.mode == "aof":
            return f"WAITAOF 1 {self.replicas} {self._timeout_ms()}"
        if self.mode == "replicas":
            return f"WAIT {self.replicas} {self._timeout_ms()}"
        return "the server's reply (appendfsync always makes it durable)"

    def _timeout_ms(self) -> int:
        return max(1, int(self.timeout * 1000))

    def confirm(self, client: redis.Redis, marker: str) -> None:
        """Return once every write made so far through ``client``'s server is as durable as asked;
        raise :class:`NotDurable` if Redis does not confirm it within :attr:`timeout`. ``marker``
        is the key written first (:attr:`fleet.endpoint.keys.ApiKeys.durability_marker`)."""
        if not self.waits:
            return
        try:
            with client.pipeline(transaction=False) as pipe:
                pipe.set(marker, "1")
                if self.mode == "aof":
                    pipe.execute_command("WAITAOF", 1, self.replicas, self._timeout_ms())  # type: ignore[no-untyped-call]
                else:
                    pipe.execute_command("WAIT", self.replicas, self._timeout_ms())  # type: ignore[no-untyped-call]
                _, reply = pipe.execute()
        except redis.RedisError as error:
            raise NotDurable(f"Redis failed while confirming: {type(error).__name__}: {error}") from None
        if self.mode == "aof":
            local, replicas = (int(n) for n in reply)
            if local < 1 or replicas < self.replicas:
                raise NotDurable(
                    f"the append-only file was not fsynced in {self.timeout:g}s "
                    f"(local {local}/1, replicas {replicas}/{self.replicas})"
                )
        elif int(reply) < self.replicas:
            raise NotDurable(f"{int(reply)} of {self.replicas} replicas confirmed in {self.timeout:g}s")


def check_server(client: redis.Redis, durability: Durability) -> None:
    """Raise :class:`DurabilityUnavailable` when the server cannot give ``durability``: ``aof``
    needs Redis 7.2 or newer (``WAITAOF``) with its append-only file on. Called at start, so a
    misconfigured API refuses to serve rather than failing every submission."""
    if durability.mode != "aof":
        return
    info = client.info("server")
    version = str(info.get("redis_version", "0"))
    parts = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if parts < (7, 2):
        raise DurabilityUnavailable(
            f"--durability aof needs WAITAOF (Redis 7.2 or newer); this server is {version}: run it "
            "with appendfsync always and --durability none, or use --durability replicas"
        )
    if str(client.config_get("appendonly").get("appendonly")) != "yes":
        raise DurabilityUnavailable("--durability aof needs the server's append-only file (appendonly yes)")
