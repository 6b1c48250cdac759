"""Building members from a kubeconfig: which contexts, which settings, and no leaked secrets."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fleet.members import (
    KubeconfigClients,
    Member,
    MemberConfigError,
    MemberSettings,
    SettingsError,
    load_members,
)
from tests.fleet.members.kubeconfig import TOKEN, write_kubeconfig


def test_every_context_but_fleet_is_a_member(tmp_path: Path) -> None:
    path = write_kubeconfig(
        tmp_path / "kubeconfig", {"member-1": "http://127.0.0.1:7001", "member-2": "http://127.0.0.1:7002"}
    )
    members = load_members(path)
    try:
        assert list(members) == ["member-1", "member-2"]
        assert members["member-2"].server == "http://127.0.0.1:7002"
        assert members["member-1"].name == "member-1"
        # The token is loaded into the client (it is sent), just never shown.
        headers: dict[str, str] = {}
        members["member-1"].api_client.update_params_for_auth(headers, [], ["BearerToken"], "/", "GET", None)
        assert headers["authorization"] == f"Bearer {TOKEN}"
    finally:
        for member in members.values():
            member.close()


def test_settings_default_and_per_member(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"a": "http://127.0.0.1:7001", "b": "http://127.0.0.1:7002"})
    slow = MemberSettings(request_timeout=30.0, attempts=6)
    members = load_members(path, settings=MemberSettings(attempts=2), per_member={"b": slow}, only=["b"])
    assert list(members) == ["b"]
    assert members["b"].settings is slow
    assert members["b"].api_client.configuration.connection_pool_maxsize == slow.pool_maxsize
    # The HTTP stack must not retry on its own: the retry policy lives in one place.
    assert members["b"].api_client.configuration.retries is False


@pytest.mark.parametrize("argument", ["per_member", "only"])
def test_unknown_member_is_refused(tmp_path: Path, argument: str) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"a": "http://127.0.0.1:7001"})
    kwargs = {"per_member": {"nope": MemberSettings()}} if argument == "per_member" else {"only": ["nope"]}
    with pytest.raises(MemberConfigError, match=rf"{argument}: unknown member 'nope'"):
        load_members(path, **kwargs)


def test_missing_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(MemberConfigError, match=r"kubeconfig .*absent: no such file"):
        load_members(tmp_path / "absent")


def test_broken_context_names_the_context(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"a": "http://127.0.0.1:7001"})
    config = yaml.safe_load(path.read_text())
    config["contexts"].append({"name": "dangling", "context": {"cluster": "missing", "user": "a-admin"}})
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(MemberConfigError, match=r"context dangling"):
        load_members(path)


def test_credentials_never_in_repr_or_errors(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"a": "https://admin:pw-in-url@127.0.0.1:7001"})
    members = load_members(path)
    texts = [repr(members), str(members["a"]), repr(KubeconfigClients(path)), members["a"].server]
    for text in texts:
        assert TOKEN not in text
        assert "pw-in-url" not in text
    assert repr(members["a"]) == "Member(name='a', server='https://127.0.0.1:7001')"


def test_member_name_is_required(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", {"a": "http://127.0.0.1:7001"})
    client = KubeconfigClients(path).build("a", MemberSettings())
    with pytest.raises(ValueError, match="member name: must be a non-empty string"):
        Member("", client)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"attempts": 0}, "attempts: must be > 0"),
        ({"request_timeout": -1.0}, "request_timeout: must be > 0"),
        ({"attempts": 2.5}, "attempts: must be a whole number"),
        ({"probe_timeout": "1s"}, "probe_timeout: must be a number"),
        ({"backoff_initial": 5.0, "backoff_max": 1.0}, "backoff_initial: must be <= backoff_max"),
    ],
)
def test_bad_settings_name_the_field(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        MemberSettings(**overrides)


def _bearer(member: Member) -> str:
    """The Authorization header the member's client would send now."""
    headers: dict[str, str] = {}
    member.api_client.update_params_for_auth(headers, [], ["BearerToken"], "/", "GET", None)
    return headers["authorization"]


def test_a_static_token_is_sent_on_every_request(tmp_path: Path) -> None:
    members = load_members(write_kubeconfig(tmp_path / "kc", {"m": "http://127.0.0.1:7001"}))
    try:
        assert [_bearer(members["m"]) for _ in range(3)] == [f"Bearer {TOKEN}"] * 3
    finally:
        members["m"].close()


def test_an_expiring_token_is_refreshed_before_a_request(tmp_path: Path) -> None:
    """An exec plugin's token that expires is fetched again (the client's own refresh hook)."""
    counter = tmp_path / "calls"
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "import datetime, json, pathlib\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "p.write_text(str(n))\n"
        "soon = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1)\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',\n"
        "  'status': {'token': f'token-{n}', 'expirationTimestamp': soon.strftime('%Y-%m-%dT%H:%M:%SZ')}}))\n"
    )
    path = write_kubeconfig(tmp_path / "kc", {"m": "http://127.0.0.1:7001"})
    config = yaml.safe_load(path.read_text())
    for user in config["users"]:
        user["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": sys.executable,
                "args": [str(plugin)],
                "interactiveMode": "Never",
            }
        }
    path.write_text(yaml.safe_dump(config))
    members = load_members(path)
    try:
        first, second = _bearer(members["m"]), _bearer(members["m"])
        assert first.startswith("Bearer token-") and second.startswith("Bearer token-")
        assert first != second  # it expires within the client's skew: fetched again
    finally:
        members["m"].close()


def test_file_paths_in_a_kubeconfig_are_read_from_its_directory(tmp_path: Path, monkeypatch: Any) -> None:
    """A relative ``certificate-authority`` or ``tokenFile`` is found beside the kubeconfig, as
    kubectl finds it, whatever the working directory."""
    home = tmp_path / "clusters"
    home.mkdir()
    (home / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    (home / "token").write_text("token-from-a-file")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "east",
                "cluster": {"server": "https://127.0.0.1:7443", "certificate-authority": "ca.crt"},
            }
        ],
        "users": [{"name": "east-admin", "user": {"tokenFile": "token"}}],
        "contexts": [{"name": "east", "context": {"cluster": "east", "user": "east-admin"}}],
        "current-context": "east",
    }
    (home / "kubeconfig").write_text(yaml.safe_dump(config))
    monkeypatch.chdir(tmp_path)
    members = load_members(Path("clusters") / "kubeconfig")
    try:
        configuration = members["east"].api_client.configuration
        assert configuration.ssl_ca_cert == str(home / "ca.crt")
        headers: dict[str, str] = {}
        members["east"].api_client.update_params_for_auth(headers, [], ["BearerToken"], "/", "GET", None)
        assert headers["authorization"] == "Bearer token-from-a-file"
    finally:
        for member in members.values():
            member.close()


def test_a_kubeconfig_that_is_not_a_map_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("- just\n- a list\n")
    with pytest.raises(MemberConfigError, match=r"kubeconfig .*kubeconfig: cannot read it \(must be a map\)"):
        load_members(path)
    path.write_text("contexts: {a: 1}\n")
    with pytest.raises(MemberConfigError, match=r"contexts: must be a list"):
        load_members(path)
