"""The manifests in ``deploy/`` render, pass Kubernetes schema validation offline, and run roles
with arguments the roles accept.

Rendering is ``kubectl kustomize`` (kustomize built into kubectl); validation is
``kubernetes-validate`` in strict mode (unknown fields refused) against the schemas it ships for
:data:`KUBERNETES_VERSION`, with no network. The PodMonitor is a Prometheus Operator CRD the
package has no schema for: it is checked against the pods it must scrape instead.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import click
import kubernetes_validate
import pytest
import yaml

from fleet.cli import ROLES, main
from tests.support.kubectl import require_kubectl

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
#: The Kubernetes version the manifests are written for and validated against (README).
KUBERNETES_VERSION = "1.31.0"
OVERLAYS = ("base", "overlays/evaluation", "overlays/production")
#: Kinds whose schemas are CRDs, not Kubernetes': checked by the tests below instead.
CRD_KINDS = {"PodMonitor"}

Doc = dict[str, Any]


def render(path: str) -> list[Doc]:
    kubectl = require_kubectl()
    done = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Doc]:
    return render(request.param)


def _validate(doc: Doc) -> None:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as error:
        cause = error.caused_by
        where = "/".join(str(p) for p in cause.absolute_path)
        pytest.fail(f"{doc['kind']}/{doc['metadata']['name']}: {where}: {cause.message}")


def test_every_rendered_object_passes_schema_validation(rendered: list[Doc]) -> None:
    for doc in rendered:
        if doc["kind"] not in CRD_KINDS:
            _validate(doc)


def test_the_member_manifest_passes_schema_validation() -> None:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "member" / "fleet-member.yaml").read_text()) if d]
    assert {d["kind"] for d in docs} >= {"ClusterRole", "ClusterRoleBinding", "ServiceAccount"}
    for doc in docs:
        _validate(doc)


def test_the_validator_refuses_what_kubernetes_would() -> None:
    """The check above can fail: a misspelt field and a bad quantity are refused."""
    deployment = next(d for d in render("base") if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbes"] = container.pop("livenessProbe")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


def _deployments(docs: list[Doc]) -> dict[str, Doc]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}


def _fleet_containers(docs: list[Doc]) -> list[tuple[Doc, Doc]]:
    return [
        (deployment, container)
        for deployment in _deployments(docs).values()
        for container in deployment["spec"]["template"]["spec"]["containers"]
        if container["image"].rsplit("/", 1)[-1].startswith("fleet")
    ]


def test_each_role_runs_with_arguments_its_parser_accepts(rendered: list[Doc], tmp_path: Path) -> None:
    containers = _fleet_containers(rendered)
    assert sorted(c["args"][0] for _d, c in containers) == sorted(ROLES)
    for deployment, container in containers:
        role, *args = container["args"]
        mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
        local: list[str] = []
        for arg in args:
            name, _, value = arg.partition("=")
            if value.startswith("/"):
                # A file a role reads must be on a volume; stand it in under tmp_path for the parser.
                where = f"{deployment['metadata']['name']}: {arg}"
                assert any(value.startswith(m + "/") for m in mounts), where
                stand_in = tmp_path / value.lstrip("/")
                stand_in.parent.mkdir(parents=True, exist_ok=True)
                stand_in.touch()
                value = str(stand_in)
            local.append(f"{name}={value}" if value else name)
        command = main.get_command(click.Context(main), role)
        assert command is not None
        try:
            context = command.make_context(f"fleet {role}", local)
        except click.UsageError as error:  # BadParameter and NoSuchOption are UsageErrors
            pytest.fail(f"{deployment['metadata']['name']}: fleet {role} {' '.join(args)}: {error}")
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        if role == "api":  # its /metrics is on its HTTPS port, for a metrics reader's token only
            assert context.params["metrics_port"] is None and "metrics" not in ports
        else:
            assert context.params["metrics_port"] == ports["metrics"]
            assert context.params["metrics_host"] == "0.0.0.0"
        if role == "api":
            assert context.params["port"] == ports["https"]
            assert context.params["tls_cert_file"] is not None and context.params["token_file"] is not None
        env = {e["name"]: e for e in container.get("env", [])}
        assert "secretKeyRef" in env["FLEET_REDIS_URL"]["valueFrom"], "the Redis URL comes from a Secret"


def test_every_pod_runs_restricted_with_requests_and_limits(rendered: list[Doc]) -> None:
    for name, deployment in _deployments(rendered).items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for container in pod["containers"]:
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["capabilities"]["drop"] == ["ALL"], name
            assert set(container["resources"]["requests"]) == {"cpu", "memory"}, name
            assert set(container["resources"]["limits"]) == {"cpu", "memory"}, name


def test_the_roles_are_highly_available_and_budgeted(rendered: list[Doc]) -> None:
    deployments = _deployments(rendered)
    assert deployments["fleet-api"]["spec"]["replicas"] >= 2
    assert deployments["fleet-dispatcher"]["spec"]["replicas"] == 2
    syncer = deployments["fleet-syncer"]
    assert syncer["spec"]["replicas"] >= 2
    assert "--sharded" in syncer["spec"]["template"]["spec"]["containers"][0]["args"]
    budgets = [d for d in rendered if d["kind"] == "PodDisruptionBudget"]
    for deployment, _container in _fleet_containers(rendered):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        covering = [b for b in budgets if b["spec"]["selector"]["matchLabels"].items() <= labels.items()]
        assert len(covering) == 1, deployment["metadata"]["name"]
    api = deployments["fleet-api"]["spec"]["template"]["spec"]["containers"][0]
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert api["livenessProbe"]["httpGet"]["path"] == "/livez"
    service = next(d for d in rendered if d["kind"] == "Service" and d["metadata"]["name"] == "fleet-api")
    assert (
        service["spec"]["selector"].items()
        <= deployments["fleet-api"]["spec"]["template"]["metadata"]["labels"].items()
    )


def _selects(selector: Doc, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions In/NotIn) selects ``labels``."""
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for rule in selector.get("matchExpressions", []):
        inside = labels.get(rule["key"]) in rule["values"]
        if inside != (rule["operator"] == "In"):
            return False
    return True


def test_prometheus_scrapes_every_role_and_grafana_gets_the_dashboard(rendered: list[Doc]) -> None:
    monitors = [d for d in rendered if d["kind"] == "PodMonitor"]
    assert {m["apiVersion"] for m in monitors} == {"monitoring.coreos.com/v1"}
    for deployment, container in _fleet_containers(rendered):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        scraping = [m for m in monitors if _selects(m["spec"]["selector"], labels)]
        assert len(scraping) == 1, deployment["metadata"]["name"]
        [endpoint] = scraping[0]["spec"]["podMetricsEndpoints"]
        assert endpoint["port"] in {p["name"] for p in container["ports"]}
        if container["args"][0] == "api":  # the API's /metrics needs a metrics reader's token
            assert (endpoint["port"], endpoint["scheme"]) == ("https", "https")
            assert endpoint["authorization"]["credentials"] == {
                "name": "fleet-metrics-reader",
                "key": "token",
            }
    maps = [d for d in rendered if d["kind"] == "ConfigMap"]
    dashboard = next(d for d in maps if "grafana_dashboard" in d["metadata"]["labels"])
    on_disk = (DEPLOY / "base" / "grafana" / "fleet-dashboard.json").read_text()
    assert dashboard["data"]["fleet-dashboard.json"] == on_disk


def test_the_evaluation_overlay_brings_a_redis_and_points_the_roles_at_it() -> None:
    docs = render("overlays/evaluation")
    secret = next(d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == "fleet-redis")
    service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "fleet-redis")
    url = secret.get("stringData", {}).get("url")
    if url is None:
        import base64

        url = base64.b64decode(secret["data"]["url"]).decode()
    assert url == f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    redis_args = _deployments(docs)["fleet-redis"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert redis_args[redis_args.index("--appendfsync") + 1] == "always"


def test_metrics_ports_stay_inside_the_namespace(rendered: list[Doc]) -> None:
    """Issue 34: every role's plain metrics port is reachable from its namespace (and from the
    namespaces labelled as Prometheus'), nothing else of a role is open; the API's HTTPS port is
    the endpoint, open to all (each request is authenticated)."""
    policies = [d for d in rendered if d["kind"] == "NetworkPolicy"]
    for deployment, container in _fleet_containers(rendered):
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        covering = [p for p in policies if _selects(p["spec"]["podSelector"], labels)]
        assert covering and all(p["spec"]["policyTypes"] == ["Ingress"] for p in covering)
        rules = [rule for p in covering for rule in p["spec"].get("ingress", [])]
        opened = {port["port"] for rule in rules for port in rule["ports"]}
        names = {p["name"] for p in container["ports"]}
        assert opened & names == names, deployment["metadata"]["name"]
        for rule in rules:
            ports = {port["port"] for port in rule["ports"]}
            if "metrics" in ports:
                sources = rule["from"]
                assert {"podSelector": {}} in sources  # the namespace's own pods
                assert all(set(s) <= {"podSelector", "namespaceSelector"} for s in sources)
                assert not any("ipBlock" in s for s in sources)
            else:
                assert ports == {"https"} and container["args"][0] == "api", rule
