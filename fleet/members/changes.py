"""The members' kubeconfig followed at run time: which members were added, removed or changed.

In a cluster the kubeconfig is a mounted Secret (``fleet-members``), which ``fleet member add``
and ``remove`` edit; the kubelet replaces the mounted files by swapping a ``..data`` symlink,
which inotify does not reliably report, so :class:`KubeconfigChanges` polls: a ``stat`` of the
file (mtime, size, inode, through the symlinks) each time, and a read only when that changed.
It then compares each member's *fingerprint*, a digest of its context with the cluster and user
entries it names (server, certificates, token, labels), with the last good set: a member whose
fingerprint differs has new credentials and needs a new client.

A file that cannot be used (unreadable, not YAML, a context naming a cluster or user the file
lacks) or that changed while it was read changes nothing: the last good set stays (one warning
until the file is good again), and the next version of the file is read again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fleet.members.clients import FLEET_CONTEXT, MemberConfigError, parse_kubeconfig

__all__ = ["KubeconfigChanges", "MemberChanges", "fingerprints"]

log = logging.getLogger("fleet.members")


@dataclass(frozen=True)
class MemberChanges:
    """What changed between two good versions of the kubeconfig (names, sorted)."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    #: Still there, with other credentials or labels: a new client replaces the old one.
    changed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    @classmethod
    def between(cls, old: Mapping[str, str], new: Mapping[str, str]) -> MemberChanges:
        """The changes from fingerprints ``old`` to ``new`` (member -> digest)."""
        return cls(
            added=tuple(sorted(set(new) - set(old))),
            removed=tuple(sorted(set(old) - set(new))),
            changed=tuple(sorted(n for n in set(old) & set(new) if old[n] != new[n])),
        )


def fingerprints(text: str | bytes, *, fleet_context: str = FLEET_CONTEXT) -> dict[str, str]:
    """Member -> the digest of its context and the cluster and user entries it names. Raises
    :class:`MemberConfigError` for a file a member's client could not be built from."""
    try:
        config = parse_kubeconfig(text)
    except yaml.YAMLError as exc:
        raise MemberConfigError(f"not valid YAML ({exc})") from None
    if not isinstance(config, dict):
        raise MemberConfigError("not a kubeconfig (no mapping at the top)")

    def entries(section: str) -> dict[str, Any]:
        items = config.get(section) or []
        if not isinstance(items, list):
            raise MemberConfigError(f"{section}: not a list")
        return {i["name"]: i for i in items if isinstance(i, dict) and isinstance(i.get("name"), str)}

    clusters, users, out = entries("clusters"), entries("users"), {}
    for name, context in entries("contexts").items():
        if name == fleet_context:
            continue
        body = context.get("context")
        if not isinstance(body, dict) or body.get("cluster") not in clusters:
            raise MemberConfigError(f"context {name}: names no cluster of the file")
        user = body.get("user")
        if user is not None and user not in users:
            raise MemberConfigError(f"context {name}: names no user of the file")
        whole = {"context": body, "cluster": clusters[body["cluster"]], "user": users.get(str(user))}
        out[name] = hashlib.sha256(json.dumps(whole, sort_keys=True, default=str).encode()).hexdigest()
    return out


class KubeconfigChanges:
    """Polls one kubeconfig for :class:`MemberChanges` (see the module docstring).

    :meth:`poll` says what changed since the last good version; the caller builds the clients it
    needs and then :meth:`accept`\\ s the changes (or :meth:`reject`\\ s them when a client could
    not be built: the set stays as it was until the file changes again).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._digest = ""
        self._prints: dict[str, str] = {}
        self._pending: tuple[str, dict[str, str]] | None = None
        self._failing = False

    @property
    def members(self) -> list[str]:
        """The members of the last good version."""
        return sorted(self._prints)

    def poll(self, *, strict: bool = False) -> MemberChanges | None:
        """The changes since the last good version, or ``None`` when there are none (or the file
        cannot be used: logged, or raised as :class:`MemberConfigError` when ``strict``)."""
        try:
            stamp = self._stat()
            if stamp == self._stamp:
                return None
            data = self.path.read_bytes()
            if self._stat() != stamp:
                return None  # written as we read it: the next poll reads it whole
            self._stamp = stamp
            digest = hashlib.sha256(data).hexdigest()
            if digest == self._digest:
                self._failing = False
                return None  # touched, or written back as it was
            prints = fingerprints(data)
        except (OSError, MemberConfigError) as error:
            self.reject(error, strict=strict)
            return None
        self._pending = (digest, prints)
        return MemberChanges.between(self._prints, prints)

    def accept(self) -> None:
        """The changes :meth:`poll` returned were applied: they are the last good set now."""
        if self._pending is not None:
            self._digest, self._prints = self._pending
            self._pending = None
        self._failing = False

    def reject(self, error: Exception, *, strict: bool = False) -> None:
        """The version polled cannot be used: keep the last good set (until the file changes)."""
        self._pending = None
        message = str(error) if str(error).startswith("kubeconfig ") else f"kubeconfig {self.path}: {error}"
        if strict:
            raise MemberConfigError(message)
        if not self._failing:
            log.warning("event=members_not_reloaded kept=%d error=%s", len(self._prints), message)
        self._failing = True

    def _stat(self) -> tuple[int, int, int]:
        try:
            stat = self.path.stat()  # through the symlinks: a swapped ``..data`` is a new inode
        except FileNotFoundError:
            raise MemberConfigError(f"kubeconfig {self.path}: no such file") from None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)
