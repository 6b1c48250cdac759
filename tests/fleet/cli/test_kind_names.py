"""The job kinds' names on the ``fleet get``/``fleet describe`` commands: kubectl's, bare and
qualified by the group; a bare name two kinds share stays the first kind's."""

from __future__ import annotations

from click.testing import CliRunner

from fleet.cli.user import describe, get


def test_kubeflows_mpijob_keeps_its_bare_names_and_t9ks_is_named_by_its_group() -> None:
    runner = CliRunner()
    for group in (get, describe):
        for name in ("mpijob", "mpijobs", "mpij", "mpijobs.kubeflow.org"):
            assert "(kubeflow.org)" in runner.invoke(group, [name, "--help"]).output, name
        for name in ("mpijobs.batch.tensorstack.dev", "mpijob.batch.tensorstack.dev"):
            assert "(batch.tensorstack.dev)" in runner.invoke(group, [name, "--help"]).output, name
        for name in ("tensorflowtrainingjob", "tensorflowtrainingjobs"):
            assert "TensorFlowTrainingJob" in runner.invoke(group, [name, "--help"]).output, name


def test_job_is_kubernetes_and_vcjob_is_volcanos() -> None:
    runner = CliRunner()
    for group in (get, describe):
        for name in ("job", "jobs", "jobs.batch"):
            assert "(batch)" in runner.invoke(group, [name, "--help"]).output, name
        for name in ("vcjob", "vcj", "jobs.batch.volcano.sh"):
            assert "(batch.volcano.sh)" in runner.invoke(group, [name, "--help"]).output, name
