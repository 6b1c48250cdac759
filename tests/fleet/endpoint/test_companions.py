"""ConfigMap, Secret and Service at the fleet through the real kubectl: a job's file with its
companions applies whole, each kind answers every verb, a Secret's stringData is stored as data
only, and a tenant sees only its own namespace's objects."""

from __future__ import annotations

import base64
import json

import pytest
import redis
import yaml

from fleet.apiserver.companion_kinds import SECRET
from fleet.state import Objects
from tests.fleet.endpoint.conftest import SAMPLES
from tests.support.kubectl import Kubectl, table

pytestmark = pytest.mark.integration

WITH_COMPANIONS = SAMPLES / "ascend" / "pytorch-with-companions.yaml"


def test_a_job_file_with_its_companions_applies_whole(kubectl: Kubectl, fleet_redis: redis.Redis) -> None:
    done = kubectl("apply", "-f", str(WITH_COMPANIONS))
    assert done.stdout.splitlines() == [
        "configmap/rings-config-companions-pytorch created",
        "secret/companions-pytorch-obs created",
        "service/companions-pytorch created",
        "ascendjob.mindxdl.gitee.com/companions-pytorch created",
    ]
    again = kubectl("apply", "-f", str(WITH_COMPANIONS))
    # As against kube-apiserver: a Secret written with stringData is patched with it again on
    # every apply (the live object holds data only), so kubectl says "configured".
    assert again.stdout.splitlines()[:3] == [
        "configmap/rings-config-companions-pytorch unchanged",
        "secret/companions-pytorch-obs configured",
        "service/companions-pytorch unchanged",
    ]
    assert table(kubectl("get", "cm").stdout)[1][:2] == ["rings-config-companions-pytorch", "1"]
    assert table(kubectl("get", "secrets").stdout)[1][:3] == ["companions-pytorch-obs", "Opaque", "2"]
    svc = table(kubectl("get", "svc").stdout)
    assert svc[0][:5] == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)"]
    assert svc[1][:5] == ["companions-pytorch", "ClusterIP", "None", "<none>", "2222/TCP"]
    [stored] = Objects(fleet_redis).list(SECRET)[0]
    assert "stringData" not in stored
    assert base64.b64decode(stored["data"]["OBS_ACCESS_KEY"]) == b"example-access-key"


def test_every_verb_on_a_configmap_and_a_secret(kubectl: Kubectl) -> None:
    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings"}, "data": {"a": "1"}}
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(settings))
    kubectl("patch", "configmap", "settings", "-p", '{"data": {"b": "2"}}')
    kubectl("label", "configmap", "settings", "team=x")
    got = json.loads(kubectl("get", "configmap", "settings", "-o", "json").stdout)
    assert got["data"] == {"a": "1", "b": "2"} and got["metadata"]["labels"] == {"team": "x"}
    token = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "token"},
        "stringData": {"token": "s3cret"},
    }
    kubectl("create", "-f", "-", stdin=yaml.safe_dump(token))
    secret = yaml.safe_load(kubectl("get", "secret", "token", "-o", "yaml").stdout)
    assert base64.b64decode(secret["data"]["token"]) == b"s3cret"
    edited = {**secret, "stringData": {"token": "other"}}
    kubectl("replace", "-f", "-", stdin=yaml.safe_dump(edited))
    replaced = yaml.safe_load(kubectl("get", "secret", "token", "-o", "yaml").stdout)
    assert base64.b64decode(replaced["data"]["token"]) == b"other" and "stringData" not in replaced
    kubectl("delete", "configmap", "settings")
    kubectl("delete", "secret", "token")
    assert kubectl("get", "cm,secret", "-o", "name").stdout.strip() == ""


def test_bad_companions_get_field_errors_that_never_quote_a_secret(kubectl: Kubectl) -> None:
    bad = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"key": "not base64!"}}
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(bad), ok=False)
    assert 'The Secret "s" is invalid: data[key]: must be base64-encoded bytes' in done.stderr
    assert "not base64!" not in done.stderr
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 0}]}}
    done = kubectl("apply", "-f", "-", stdin=yaml.safe_dump(svc), ok=False)
    assert "spec.ports[0].port: Invalid value: 0: must be between 1 and 65535, inclusive" in done.stderr


def test_kubectls_typed_create_commands_work(kubectl: Kubectl) -> None:
    """kubectl encodes these as Kubernetes protobuf: decoded as the JSON they stand for."""
    kubectl("create", "configmap", "train-env", "--from-literal=EPOCHS=90", "--from-literal=LR=1.6")
    kubectl("create", "secret", "generic", "obs", "--from-literal=key=s3cret", "--type=Opaque")
    kubectl("create", "secret", "docker-registry", "pull", "--docker-server=r.example.com",
            "--docker-username=u", "--docker-password=p")  # fmt: skip
    kubectl("create", "service", "clusterip", "hosts", "--clusterip=None", "--tcp=2222:2222")
    kubectl("label", "configmap", "train-env", "team=nlp")
    cm = json.loads(kubectl("get", "configmap", "train-env", "-o", "json").stdout)
    assert cm["data"] == {"EPOCHS": "90", "LR": "1.6"} and cm["metadata"]["labels"] == {"team": "nlp"}
    secret = json.loads(kubectl("get", "secret", "obs", "-o", "json").stdout)
    assert (secret["type"], base64.b64decode(secret["data"]["key"])) == ("Opaque", b"s3cret")
    pull = json.loads(kubectl("get", "secret", "pull", "-o", "json").stdout)
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    assert "r.example.com" in base64.b64decode(pull["data"][".dockerconfigjson"]).decode()
    svc = json.loads(kubectl("get", "service", "hosts", "-o", "json").stdout)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [
        {"name": "2222-2222", "port": 2222, "protocol": "TCP", "targetPort": 2222}
    ]
    assert svc["spec"]["selector"] == {"app": "hosts"}
