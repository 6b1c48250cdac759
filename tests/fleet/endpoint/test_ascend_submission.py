"""MindCluster's schedule policies and hardware rules at submission, through the real kubectl.

Issue 18: valid ``huawei.com/schedule_policy`` values (``chip8-node8-ra64-sp``, ``chip2-node16-sp``,
``chip1-softShareDev``) were refused as "not of the form chip<C>-node<N>". The samples in
``config/samples/ascend/`` apply as written; where MindCluster leaves a choice to Fleet the answer
carries a kubectl Warning saying which; what MindCluster's plugin refuses outright is a 422 that
names the field and the rule.
"""

from __future__ import annotations

import pytest

from tests.fleet.endpoint.conftest import SAMPLES
from tests.support.kubectl import Kubectl

pytestmark = pytest.mark.integration

ASCEND = SAMPLES / "ascend"


@pytest.mark.parametrize(
    ("sample", "name"),
    [
        ("pytorch-chip8-node8-ra64-sp.yaml", "pt-950-superpod"),
        ("pytorch-a3-superpod-2x16npu.yaml", "pt-a3-superpod"),
        ("pytorch-softsharedev.yaml", "pt-soft-share"),
        ("pytorch-chip4-node8-1npu.yaml", "pt-chip4-one"),
        ("pytorch-chip8-node8-1npu.yaml", "pt-chip8-one"),
    ],
)
def test_the_issue_s_schedule_policies_are_accepted(kubectl: Kubectl, sample: str, name: str) -> None:
    done = kubectl("apply", "-f", str(ASCEND / sample))
    assert done.stdout.strip() == f"ascendjob.mindxdl.gitee.com/{name} created"


def test_a_choice_fleet_makes_comes_back_as_a_warning(kubectl: Kubectl) -> None:
    done = kubectl("apply", "-f", str(ASCEND / "pytorch-a3-superpod-2x16npu.yaml"))
    assert (
        "Warning: metadata.annotations.sp-block: Fleet places the job on one member by node rules; "
        "which SuperPoD its nodes share is left to the member's scheduler"
    ) in done.stderr.splitlines()
    nine = kubectl("apply", "-f", str(ASCEND / "pytorch-9npu.yaml"))
    assert nine.stdout.strip() == "ascendjob.mindxdl.gitee.com/pt-nine created"
    assert any("names no accelerator-type, schedule policy" in line for line in nine.stderr.splitlines())


def test_what_the_plugin_refuses_is_a_422_naming_the_rule(kubectl: Kubectl) -> None:
    refused = kubectl("apply", "-f", str(ASCEND / "pytorch-a3-2x1npu.yaml"), ok=False)
    assert refused.returncode != 0
    assert "is invalid: spec.replicaSpecs: " in refused.stderr
    assert "1 huawei.com/Ascend910 per pod is not allowed for a distributed job on Atlas 800T/800I A3" in (
        refused.stderr
    )
    assert kubectl("get", "acjob", "pt-a3-odd", ok=False).returncode != 0
