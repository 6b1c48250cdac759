"""What a user's update may change of a submitted job (issue 34, requirement 2; issue 29,
requirement 5), through kubectl and the official Python client with tenant and admin tokens.

* ``kubectl replace -f`` of the job's own file (a PUT without ``metadata.resourceVersion``) is
  refused as kube-apiserver refuses it for a custom resource: 422, ``metadata.resourceVersion:
  Invalid value: 0x0: must be specified for an update``. A built-in kind (ConfigMap) still takes
  an unconditional update, as Kubernetes lets it.
* An update that would drop Fleet's finalizer ``fleet.io/dispatch`` (``kubectl patch``,
  ``kubectl edit``, the client's patch) is a 422 naming the finalizer, for admins too.
* The job's owners may ``kubectl label`` and ``kubectl annotate`` it and add and remove a
  finalizer of their own (a deleted job is then not held by it), but not Fleet's labels and
  annotations nor the quota label; another namespace's user may do none of it (403).
"""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import fakeredis
import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from fleet.endpoint.auth import parse_token_file
from queues import QUOTA_LABEL
from tests.fleet.endpoint.conftest import JOB
from tests.fleet.endpoint.test_auth import TOKEN_FILE, TOKENS, TREE
from tests.support.fleet_api import FleetApiThread, official_client
from tests.support.kubectl import Kubectl, require_kubectl

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "mindxdl.gitee.com", "v1", "ascendjobs"
FINALIZER: Final = "fleet.io/dispatch"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetApiThread]:
    """One replica over HTTPS (kubectl sends bearer tokens only over HTTPS), the tree applied."""
    redis_client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    tokens = parse_token_file(TOKEN_FILE)
    with FleetApiThread(redis_client, tokens=tokens, members=lambda: ["member-1"], tls=True) as api:
        custom = client.CustomObjectsApi(
            official_client(api, tmp_path_factory.mktemp("admin"), token=TOKENS["admin"])
        )
        custom.create_namespaced_custom_object("scheduling.sigs.k8s.io", "v1beta1", "kube-system",
                                               "elasticquotatrees", TREE)  # fmt: skip
        yield api
    redis_client.close()


def api_as(server: FleetApiThread, directory: Path, who: str) -> client.ApiClient:
    """The official client with ``who``'s token."""
    (directory / f"client-{who}").mkdir(exist_ok=True)
    return official_client(server, directory / f"client-{who}", token=TOKENS[who])


def job_file(directory: Path, name: str) -> Path:
    """The job as its owner wrote it: the sample, in team-a."""
    obj: dict[str, Any] = yaml.safe_load(JOB.read_text())
    obj["metadata"].update(name=name, namespace="team-a")
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return path


def kubectl_as(server: FleetApiThread, directory: Path, who: str) -> Kubectl:
    config = server.kubeconfig(directory / f"{who}.kubeconfig", token=TOKENS[who])
    return Kubectl(require_kubectl(), config, directory / f"cache-{who}")


def stored(server: FleetApiThread, name: str, directory: Path) -> dict[str, Any]:
    jobs = client.CustomObjectsApi(api_as(server, directory, "admin"))
    obj = jobs.get_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, name)
    assert isinstance(obj, dict)
    return obj


def status(error: ApiException) -> dict[str, Any]:
    """The Status the server answered with."""
    body: dict[str, Any] = json.loads(error.body or "{}")
    return body


def causes(error: ApiException) -> list[dict[str, str]]:
    found: list[dict[str, str]] = status(error)["details"]["causes"]
    return found


def test_replace_of_the_jobs_own_file_needs_its_resource_version(
    server: FleetApiThread, tmp_path: Path
) -> None:
    alice = kubectl_as(server, tmp_path, "alice")
    path = job_file(tmp_path, "replaced")
    alice("create", "-f", str(path))
    before = stored(server, "replaced", tmp_path)

    # kubectl replace reads the version itself when the file has none, so the refusal is the
    # finalizer the file lacks; nothing is written.
    done = alice("replace", "-f", str(path), ok=False)
    assert done.returncode != 0
    assert f"metadata.finalizers: Forbidden: {FINALIZER} is Fleet's finalizer" in done.stderr, done.stderr
    after = stored(server, "replaced", tmp_path)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert FINALIZER in after["metadata"]["finalizers"]

    # The official client's replace of the same body, as an admin: a PUT without a version.
    jobs = client.CustomObjectsApi(api_as(server, tmp_path, "admin"))
    body = yaml.safe_load(path.read_text())
    with pytest.raises(ApiException) as refused:
        jobs.replace_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "replaced", body)
    assert refused.value.status == 422
    assert causes(refused.value) == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 0x0: must be specified for an update",
            "field": "metadata.resourceVersion",
        }
    ]

    # A built-in kind keeps its unconditional update (AllowUnconditionalUpdate).
    core = client.CoreV1Api(api_as(server, tmp_path, "alice"))
    config = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cfg"), data={"a": "1"})
    core.create_namespaced_config_map("team-a", config)
    config.data = {"a": "2"}
    assert core.replace_namespaced_config_map("cfg", "team-a", config).data == {"a": "2"}


def _editor(directory: Path) -> Path:
    """A KUBE_EDITOR that drops every finalizer line of the file kubectl hands it."""
    script = directory / "drop-finalizer.sh"
    script.write_text("#!/bin/sh\nsed -i '/^ *- fleet\\.io\\/dispatch$/d' \"$1\"\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


@pytest.mark.parametrize("who", ["alice", "admin"])
def test_no_update_drops_fleets_finalizer(
    server: FleetApiThread, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, who: str
) -> None:
    name = f"keeps-finalizer-{who}"
    user = kubectl_as(server, tmp_path, who)
    user("create", "-f", str(job_file(tmp_path, name)))
    version = stored(server, name, tmp_path)["metadata"]["resourceVersion"]

    for kind, patch in (
        ("json", '[{"op": "remove", "path": "/metadata/finalizers"}]'),
        ("merge", '{"metadata": {"finalizers": null}}'),
        ("merge", '{"metadata": {"finalizers": ["example.com/mine"]}}'),
    ):
        done = user("patch", "acjob", name, "-n", "team-a", "--type", kind, "-p", patch, ok=False)
        assert done.returncode != 0, done.stdout
        assert f"metadata.finalizers: Forbidden: {FINALIZER} is Fleet's finalizer" in done.stderr, done.stderr

    monkeypatch.setenv("KUBE_EDITOR", str(_editor(tmp_path)))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    done = user("edit", "acjob", name, "-n", "team-a", ok=False)
    assert done.returncode != 0, done.stdout
    assert "is invalid" in done.stderr, done.stderr
    # kubectl keeps the edit, headed by the refusal's causes, in a file it names.
    kept = Path(re.findall(r'stored to "([^"]+)"', done.stderr)[-1]).read_text()
    assert f"# * metadata.finalizers: Forbidden: {FINALIZER} is Fleet's finalizer" in kept, kept

    jobs = client.CustomObjectsApi(api_as(server, tmp_path, who))
    with pytest.raises(ApiException) as refused:
        jobs.patch_namespaced_custom_object(
            GROUP, VERSION, "team-a", PLURAL, name, {"metadata": {"finalizers": ["example.com/mine"]}}
        )
    assert refused.value.status == 422
    assert [c["field"] for c in causes(refused.value)] == ["metadata.finalizers"]
    assert causes(refused.value)[0]["reason"] == "FieldValueForbidden"

    after = stored(server, name, tmp_path)
    assert after["metadata"]["finalizers"] == [FINALIZER]
    assert after["metadata"]["resourceVersion"] == version, "a refused update wrote nothing"


def test_owners_label_annotate_and_hold_their_jobs_but_not_with_fleets_keys(
    server: FleetApiThread, tmp_path: Path
) -> None:
    alice, bob = kubectl_as(server, tmp_path, "alice"), kubectl_as(server, tmp_path, "bob")
    alice("create", "-f", str(job_file(tmp_path, "owned")))
    where = ("-n", "team-a")

    alice("label", "acjob", "owned", "team=vision", *where)
    alice("annotate", "acjob", "owned", "owner=alice@example.com", *where)
    alice("label", "acjob", "owned", "tor-affinity-", *where)  # one of the file's own labels goes
    alice("patch", "acjob", "owned", *where, "--type", "json",
          "-p", '[{"op": "add", "path": "/metadata/finalizers/-", "value": "example.com/hold"}]')  # fmt: skip
    obj = stored(server, "owned", tmp_path)
    assert obj["metadata"]["labels"]["team"] == "vision"
    assert "tor-affinity" not in obj["metadata"]["labels"]
    assert obj["metadata"]["annotations"]["owner"] == "alice@example.com"
    assert obj["metadata"]["finalizers"] == [FINALIZER, "example.com/hold"]

    # Fleet's keys and the quota label are not the owner's, whatever the verb.
    for args, field in (
        (("label", "acjob", "owned", f"{QUOTA_LABEL}=b"), f"metadata.labels[{QUOTA_LABEL}]"),
        (("label", "acjob", "owned", "fleet.io/job-uid=forged"), "metadata.labels[fleet.io/job-uid]"),
        (("annotate", "acjob", "owned", "fleet.io/priority=2000000000"),
         "metadata.annotations[fleet.io/priority]"),
        (("annotate", "acjob", "owned", "sim.fleet.io/duration-seconds=1"),
         "metadata.annotations[sim.fleet.io/duration-seconds]"),
        (("annotate", "acjob", "owned", "huawei.com/schedule_policy=chip2-node16"),
         "metadata.annotations[huawei.com/schedule_policy]"),
    ):  # fmt: skip
        done = alice(*args, *where, ok=False)
        assert done.returncode != 0, args
        assert f"{field}: Forbidden:" in done.stderr and "reserved to Fleet" in done.stderr, done.stderr

    # Another namespace's user may not touch it at all.
    done = bob("label", "acjob", "owned", "team=other", *where, ok=False)
    assert 'User "bob" cannot get resource "ascendjobs"' in done.stderr, done.stderr
    with pytest.raises(ApiException) as refused:
        client.CustomObjectsApi(api_as(server, tmp_path, "bob")).patch_namespaced_custom_object(
            GROUP, VERSION, "team-a", PLURAL, "owned", {"metadata": {"labels": {"team": "other"}}}
        )
    assert refused.value.status == 403
    assert 'User "bob" cannot patch resource "ascendjobs"' in status(refused.value)["message"]

    # Deleted, the job is held by both finalizers; its owner lets go of their own.
    alice("delete", "acjob", "owned", *where, "--wait=false")
    jobs = client.CustomObjectsApi(api_as(server, tmp_path, "alice"))
    terminating: Any = jobs.get_namespaced_custom_object(GROUP, VERSION, "team-a", PLURAL, "owned")
    assert terminating["metadata"]["deletionTimestamp"]
    released: Any = jobs.patch_namespaced_custom_object(
        GROUP, VERSION, "team-a", PLURAL, "owned", {"metadata": {"finalizers": [FINALIZER]}}
    )
    assert released["metadata"]["finalizers"] == [FINALIZER]
    assert stored(server, "owned", tmp_path)["metadata"]["finalizers"] == [FINALIZER]


def test_kubectl_auth_can_i_says_owners_may_update_their_jobs(server: FleetApiThread, tmp_path: Path) -> None:
    alice = kubectl_as(server, tmp_path, "alice")
    for verb in ("update", "patch"):
        assert alice("auth", "can-i", verb, "ascendjobs", "-n", "team-a").stdout.strip() == "yes"
        assert alice("auth", "can-i", verb, "ascendjobs", "-n", "team-b", ok=False).stdout.strip() == "no"
    assert (
        alice(
            "auth", "can-i", "update", "ascendjobs", "--subresource", "status", "-n", "team-a", ok=False
        ).stdout.strip()
        == "no"
    )
