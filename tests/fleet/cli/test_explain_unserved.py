"""A file with a kind the fleet does not serve is refused whole, naming that kind and every kind
the fleet serves: by ``fleet explain`` before it asks anything (``kubectl apply`` would create the
file's ConfigMap, then fail on the kind), and by the fleet API's 404 to a client that posts it
without discovery."""

from __future__ import annotations

from pathlib import Path

import fakeredis
import yaml
from click.testing import CliRunner

from fleet.cli import main
from tests.fleet.endpoint.conftest import call
from tests.support.fleet_api import FleetApiThread

SAMPLES = Path(__file__).resolve().parents[3] / "config" / "samples"
RAYJOB = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "rayjob-sample", "namespace": "default"},
    "spec": {"entrypoint": "python /home/ray/samples/sample_code.py"},
}


def test_fleet_explain_names_the_unserved_kind_and_the_kinds_served(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all((SAMPLES / "vcjob-mindspore-910b.yaml").read_text()))
    path = tmp_path / "mixed.yaml"
    path.write_text(yaml.safe_dump_all([docs[0], RAYJOB, docs[1]]))
    result = CliRunner().invoke(
        main, ["explain", "-f", str(path)], env={"KUBECONFIG": str(tmp_path / "no-such-kubeconfig")}
    )
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert message.startswith(
        f"error: {path}: the fleet does not serve kind 'RayJob' in version 'ray.io/v1'; "
    )
    for served in ("AscendJob (mindxdl.gitee.com/v1)", "Job (batch.volcano.sh/v1alpha1)", "ConfigMap (v1)"):
        assert served in message


def test_the_api_404_names_the_unserved_resource_and_the_kinds_served() -> None:
    client = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    with FleetApiThread(client, members=lambda: ["member-1"]) as api:
        code, answer = call(api, "POST", "/apis/ray.io/v1/namespaces/default/rayjobs", RAYJOB)
        assert (code, answer["reason"]) == (404, "NotFound"), answer
        assert answer["message"].startswith(
            "the server could not find the requested resource "
            "(rayjobs.ray.io/v1 is not served here; it serves "
        )
        assert "PyTorchJob (kubeflow.org/v1)" in answer["message"]
        assert "Job (batch.volcano.sh/v1alpha1)" in answer["message"]
        code, answer = call(api, "GET", "/apis/batch.volcano.sh/v1beta1/namespaces/default/jobs")
        assert code == 404 and "jobs.batch.volcano.sh/v1beta1 is not served here" in answer["message"]
