"""Where member clients come from: one :class:`ClientFactory`, today a kubeconfig file.

Building an ``ApiClient`` is the only place that sees credentials, so it lives behind one small
protocol: :class:`KubeconfigClients` reads a kubeconfig (one context per member, every context
except the one named ``fleet``); an in-cluster or secret-backed factory can replace it later
without touching the access code. The factory also turns off the HTTP stack's own retries: the
retry policy is :class:`~fleet.members.retry.Caller`'s alone, so a request is never retried twice
over.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes.client import ApiClient, Configuration
from kubernetes.config import kube_config
from kubernetes.config.config_exception import ConfigException

from fleet.members.access import Member
from fleet.members.names import FLEET_CONTEXT
from fleet.members.settings import MemberSettings

__all__ = [
    "FLEET_CONTEXT",
    "MEMBER_EXTENSION",
    "ClientFactory",
    "KubeconfigClients",
    "MemberConfigError",
    "load_members",
    "member_labels",
]

#: The context extension holding a member's labels, ``{"labels": {...}}``: what a Karmada Cluster
#: object's labels and ``provider``/``region``/``zone`` say, kept where Fleet's members are
#: defined (kubectl and the ``kubernetes`` client keep extensions and ignore them).
MEMBER_EXTENSION = "fleet.io/member"


class MemberConfigError(ValueError):
    """The member configuration cannot be used; the message names the file and the context."""


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_kubeconfig(text: str | bytes) -> Any:
    """A kubeconfig's text as YAML's safe loader reads it, libyaml's when present: PyYAML's
    pure-Python loader took half a second of a role's start for 100 members (issue 30). Raises
    ``yaml.YAMLError``."""
    return yaml.load(text, Loader=_LOADER)


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """The kubeconfig at ``path`` (:func:`parse_kubeconfig`), or :class:`MemberConfigError`
    naming the file."""
    if not path.is_file():
        raise MemberConfigError(f"kubeconfig {path}: no such file")
    try:
        config = parse_kubeconfig(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MemberConfigError(f"kubeconfig {path}: cannot read it ({exc})") from None
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise MemberConfigError(f"kubeconfig {path}: cannot read it (must be a map)")
    return config


class ClientFactory(Protocol):
    """Knows the members and builds an authenticated ``ApiClient`` for one of them."""

    def members(self) -> list[str]:
        """Member names, in the order the source lists them."""
        ...

    def build(self, name: str, settings: MemberSettings) -> ApiClient:
        """A new client for member ``name``; raises :class:`MemberConfigError` if it cannot."""
        ...


class KubeconfigClients:
    """Members from a kubeconfig file: one context each, named after the member."""

    def __init__(self, path: str | os.PathLike[str], *, fleet_context: str = FLEET_CONTEXT) -> None:
        self.path = Path(path)
        self.fleet_context = fleet_context
        self._parsed: Any = None

    def __repr__(self) -> str:
        return f"KubeconfigClients(path={str(self.path)!r})"

    def _config(self) -> dict[str, Any]:
        """The kubeconfig, parsed once for every member (one C-speed YAML load: with 100 members
        the ``kubernetes`` client's own pure-Python loads, one to list the contexts and one to
        build the clients, took half a second of a role's start; issue 30)."""
        if self._parsed is None:
            self._parsed = read_kubeconfig(self.path)
        config: dict[str, Any] = self._parsed
        return config

    def members(self) -> list[str]:
        config = self._config()
        contexts = config.get("contexts")
        if not isinstance(contexts, list):
            raise MemberConfigError(
                f"kubeconfig {self.path}: cannot read contexts (contexts: must be a list)"
            )
        names: list[str] = []
        # The fleet endpoint under another user (``fleet up``'s tenant context, team-a) is no member.
        fleet_clusters = {
            (context.get("context") or {}).get("cluster")
            for context in contexts
            if isinstance(context, dict) and context.get("name") == self.fleet_context
        } - {None}
        for context in contexts:
            name = context.get("name") if isinstance(context, dict) else None
            if not isinstance(name, str) or not name:
                raise MemberConfigError(f"kubeconfig {self.path}: contexts[].name: every context needs one")
            cluster = (context.get("context") or {}).get("cluster")
            if name != self.fleet_context and cluster not in fleet_clusters:
                names.append(name)
        return names

    def build(self, name: str, settings: MemberSettings) -> ApiClient:
        configuration = Configuration()
        config = self._config()
        try:
            # As ``load_kube_config`` reads one file: relative certificate and token paths are
            # taken from the kubeconfig's directory (``KubeConfigMerger`` does the same).
            loader = kube_config.KubeConfigLoader(  # type: ignore[no-untyped-call]
                config_dict=config,
                active_context=name,
                config_base_path=os.path.abspath(os.path.dirname(self.path)),
            )
            loader.load_and_set(configuration)  # type: ignore[no-untyped-call]  # as load_kube_config
            if "expiry" not in vars(loader):
                # Credentials that never expire (a token, a token file, a certificate): the
                # loader's hook, run before every request, would only set the same values again,
                # and setting ``host`` re-reads the proxy environment: a tenth of the CPU of a
                # member call. Expiring ones (an exec plugin's, an auth provider's) keep it.
                configuration.refresh_api_key_hook = None
        except (ConfigException, OSError, ValueError) as exc:
            raise MemberConfigError(f"kubeconfig {self.path}: context {name}: {exc}") from None
        configuration.retries = False  # Caller owns retries
        configuration.connection_pool_maxsize = settings.pool_maxsize
        return ApiClient(configuration=configuration)


def load_members(
    source: ClientFactory | str | os.PathLike[str],
    *,
    settings: MemberSettings | None = None,
    per_member: Mapping[str, MemberSettings] | None = None,
    only: Iterable[str] | None = None,
) -> dict[str, Member]:
    """Build a :class:`Member` for every member of ``source`` (a kubeconfig path or a factory).

    ``settings`` apply to all members, ``per_member`` replaces them for the members it names;
    ``only`` restricts the result to some members. Naming a member the source does not have, in
    ``per_member`` or ``only``, is an error rather than a silent no-op.
    """
    factory: ClientFactory = KubeconfigClients(source) if isinstance(source, str | os.PathLike) else source
    default = settings or MemberSettings()
    overrides = dict(per_member or {})
    names = factory.members()
    wanted = list(only) if only is not None else names
    for label, requested in (("per_member", overrides), ("only", wanted)):
        unknown = sorted(set(requested) - set(names))
        if unknown:
            raise MemberConfigError(f"{label}: unknown member {unknown[0]!r} (members: {', '.join(names)})")
    members: dict[str, Member] = {}
    for name in names:
        if name not in wanted:
            continue
        member_settings = overrides.get(name, default)
        client = factory.build(name, member_settings)
        members[name] = Member(name, client, member_settings)
    return members


def member_labels(path: str | os.PathLike[str] | None) -> dict[str, dict[str, str]]:
    """Member -> its labels, from each context's :data:`MEMBER_EXTENSION` in the kubeconfig at
    ``path`` (members without one are left out). Raises :class:`MemberConfigError` for labels
    that are not a map of strings, naming the context."""
    if path is None or not Path(path).is_file():
        return {}
    config = read_kubeconfig(Path(path))
    out: dict[str, dict[str, str]] = {}
    for context in config.get("contexts") or []:
        name = context.get("name") if isinstance(context, dict) else None
        body = context.get("context") if isinstance(context, dict) else None
        if not isinstance(name, str) or name == FLEET_CONTEXT or not isinstance(body, dict):
            continue
        for extension in body.get("extensions") or []:
            if not isinstance(extension, dict) or extension.get("name") != MEMBER_EXTENSION:
                continue
            labels = (extension.get("extension") or {}).get("labels") or {}
            if not isinstance(labels, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
            ):
                raise MemberConfigError(
                    f"kubeconfig {path}: context {name}: extensions[{MEMBER_EXTENSION}].labels "
                    "must be a map of strings"
                )
            out[name] = dict(labels)
    return out
