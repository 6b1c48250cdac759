"""What a simulated pod's log says (issue 33, req. 6): the lines a training container would
write, derived from the pod, the same for every reader."""

from __future__ import annotations

from fleet.sim.logs import STEP_SECONDS, log_lines
from fleet.timestamps import rfc3339

T0 = 1_800_000_000.0


def pod(state: dict[str, object]) -> dict[str, object]:
    return {
        "metadata": {"namespace": "default", "name": "job-worker-0"},
        "spec": {"nodeName": "n1", "containers": [{"name": "ascend"}]},
        "status": {"startTime": rfc3339(T0), "containerStatuses": [{"name": "ascend", "state": state}]},
    }


def test_a_running_pod_writes_a_line_at_start_and_one_a_step() -> None:
    running = pod({"running": {"startedAt": rfc3339(T0)}})
    lines = log_lines(running, "ascend", T0 + 2 * STEP_SECONDS + 1)
    assert [text for _, text in lines] == [
        "fleet-sim: container ascend of pod default/job-worker-0 started on node n1",
        "training: step 100, 5s elapsed",
        "training: step 200, 10s elapsed",
    ]
    assert log_lines(running, "ascend", T0 + 1) == lines[:1]


def test_a_terminated_pod_ends_with_its_exit() -> None:
    ended = pod({"terminated": {"startedAt": rfc3339(T0), "finishedAt": rfc3339(T0 + 7), "exitCode": 137}})
    texts = [text for _, text in log_lines(ended, "ascend", T0 + 100)]
    assert texts[-1] == "fleet-sim: container ascend exited with code 137 (Error)"
    assert len(texts) == 3  # started, one step, the exit: nothing after it ended


def test_a_pod_not_started_has_no_log() -> None:
    waiting = pod({"waiting": {"reason": "ContainerCreating"}})
    waiting["status"] = {}
    assert log_lines(waiting, "ascend", T0) == []
