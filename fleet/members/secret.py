"""The members' kubeconfig kept as a Secret in the cluster Fleet runs in.

The roles read their members from one kubeconfig (one context per member, named after it,
:class:`fleet.members.KubeconfigClients`); in a cluster it is the key ``kubeconfig`` of the
Secret ``fleet-members`` mounted into every pod (``deploy/``). ``fleet member add`` and ``fleet
member remove`` edit that Secret through the official client, with the Secret's
resourceVersion as a precondition, so two admins editing at once cannot drop each other's
member. A member's entry carries its credentials inline (certificate and token data, not file
paths that would not exist in the pods); credentials that need a program or a provider at the
fleet (``exec``, ``auth-provider``) are refused: a member is given a ServiceAccount token
(``deploy/member/fleet-member.yaml``).
"""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes.client import ApiClient, CoreV1Api, V1ObjectMeta, V1Secret
from kubernetes.client.exceptions import ApiException

__all__ = [
    "DEFAULT_SECRET",
    "KEY",
    "MemberSecret",
    "SecretError",
    "member_entry",
    "members_of",
    "with_member",
    "without_member",
]

DEFAULT_SECRET: Final = "fleet-members"
KEY: Final = "kubeconfig"
_FILES: Final = (
    ("cluster", "certificate-authority", "certificate-authority-data"),
    ("user", "client-certificate", "client-certificate-data"),
    ("user", "client-key", "client-key-data"),
)


class SecretError(ValueError):
    """The member or the Secret cannot be used; the message says which and why (never a credential)."""


def _named(entries: list[dict[str, Any]] | None, name: object, what: str, source: Path) -> dict[str, Any]:
    for entry in entries or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    raise SecretError(f"kubeconfig {source}: no {what} named {name!r}")


def member_entry(source: Path, context: str | None, name: str) -> dict[str, Any]:
    """A kubeconfig holding only ``context`` of ``source`` (its current one by default) as
    cluster, user and context all named ``name``, with every file it names read inline."""
    try:
        config = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise SecretError(f"kubeconfig {source}: cannot read it ({error})") from None
    chosen = context or config.get("current-context")
    if not chosen:
        raise SecretError(f"kubeconfig {source}: no --context given and no current-context")
    ctx = _named(config.get("contexts"), chosen, "context", source).get("context") or {}
    cluster = copy.deepcopy(_named(config.get("clusters"), ctx.get("cluster"), "cluster", source)["cluster"])
    user: dict[str, Any] = {}
    if ctx.get("user"):
        user = copy.deepcopy(_named(config.get("users"), ctx["user"], "user", source).get("user") or {})
    for kind in ("exec", "auth-provider"):
        if kind in user:
            raise SecretError(
                f"context {chosen}: its user's credentials come from {kind}, which the fleet's pods "
                "cannot run: give Fleet a ServiceAccount token in the member "
                "(deploy/member/fleet-member.yaml)"
            )
    sections = {"cluster": cluster, "user": user}
    for section, file_key, data_key in _FILES:
        target = sections[section]
        if file_key in target:
            path = Path(target.pop(file_key))
            path = path if path.is_absolute() else source.parent / path
            try:
                target[data_key] = base64.b64encode(path.read_bytes()).decode()
            except OSError as error:
                raise SecretError(f"context {chosen}: {file_key}: cannot read {path} ({error})") from None
    if "tokenFile" in user:
        path = Path(user.pop("tokenFile"))
        path = path if path.is_absolute() else source.parent / path
        try:
            user["token"] = path.read_text(encoding="utf-8").strip()
        except OSError as error:
            raise SecretError(f"context {chosen}: tokenFile: cannot read {path} ({error})") from None
    context_body: dict[str, Any] = {"cluster": name, "user": name}
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context_body}],
        "current-context": name,
    }


def members_of(config: dict[str, Any]) -> list[str]:
    return [str(c["name"]) for c in config.get("contexts") or []]


def with_member(config: dict[str, Any] | None, entry: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the member of ``entry`` added (or replaced)."""
    name = members_of(entry)[0]
    merged: dict[str, Any] = (
        without_member(config, name) if config else {"apiVersion": "v1", "kind": "Config"}
    )
    for part in ("clusters", "users", "contexts"):
        merged[part] = [*(merged.get(part) or []), *entry[part]]
    merged.setdefault("current-context", name)
    return merged


def without_member(config: dict[str, Any], name: str) -> dict[str, Any]:
    """``config`` without the member ``name`` (its context, and the cluster and user it names)."""
    out = copy.deepcopy(config)
    ctx = next((c for c in out.get("contexts") or [] if c.get("name") == name), None)
    if ctx is None:
        return out
    body = ctx.get("context") or {}
    out["contexts"] = [c for c in out["contexts"] if c.get("name") != name]
    out["clusters"] = [c for c in out.get("clusters") or [] if c.get("name") != body.get("cluster")]
    out["users"] = [u for u in out.get("users") or [] if u.get("name") != body.get("user")]
    if out.get("current-context") == name:
        out["current-context"] = out["contexts"][0]["name"] if out["contexts"] else ""
    return out


class MemberSecret:
    """The Secret holding the members' kubeconfig, in the cluster ``api_client`` reaches."""

    def __init__(self, api_client: ApiClient, namespace: str, name: str = DEFAULT_SECRET) -> None:
        self.core = CoreV1Api(api_client)
        self.namespace = namespace
        self.name = name

    def read(self) -> tuple[dict[str, Any] | None, str | None]:
        """(the kubeconfig, the Secret's resourceVersion); (None, None) when there is no Secret."""
        try:
            secret = self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as error:
            if error.status == 404:
                return None, None
            raise SecretError(f"secret {self.namespace}/{self.name}: {error.status} {error.reason}") from None
        raw = (secret.data or {}).get(KEY)
        config = yaml.safe_load(base64.b64decode(raw)) if raw else None
        return config, secret.metadata.resource_version if secret.metadata else None

    def write(self, config: dict[str, Any], resource_version: str | None) -> None:
        """Store ``config``: create the Secret, or replace it if still at ``resource_version``."""
        data = {KEY: base64.b64encode(yaml.safe_dump(config, sort_keys=False).encode()).decode()}
        metadata = V1ObjectMeta(
            name=self.name,
            namespace=self.namespace,
            labels={"app.kubernetes.io/part-of": "fleet"},
            resource_version=resource_version,
        )
        body = V1Secret(api_version="v1", kind="Secret", metadata=metadata, type="Opaque", data=data)
        try:
            if resource_version is None:
                self.core.create_namespaced_secret(self.namespace, body)
            else:
                self.core.replace_namespaced_secret(self.name, self.namespace, body)
        except ApiException as error:
            if error.status == 409:
                raise SecretError(
                    f"secret {self.namespace}/{self.name} changed meanwhile: run the command again"
                ) from None
            raise SecretError(f"secret {self.namespace}/{self.name}: {error.status} {error.reason}") from None
