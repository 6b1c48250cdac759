"""A job's priority: resolved through the fleet's PriorityClasses at submission, recorded on the
job, and kept when the classes change (the reconcile path queues a stored job with what was
recorded)."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from fleet.jobs import PriorityClasses, PriorityClassNotFound, job_priority, submit
from fleet.jobs.priority import (
    PRIORITY_ANNOTATION,
    JobPriority,
    priority_classes,
    resolve,
)
from fleet.jobs.submit import enqueue, prepare
from fleet.kinds import PRIORITY_CLASS
from fleet.state import Objects
from fleet.workloads import InvalidWorkload
from queues import Ledger
from tests.fleet.placement import factory
from tests.support.kinds import FLEET_ASCENDJOB

FIELD = "spec.runPolicy.schedulingPolicy.priorityClass"


def job(name: str, *, priority_class: str | None = None, annotation: str | None = None) -> dict[str, Any]:
    obj = factory.job(name)
    obj["metadata"]["namespace"] = "default"
    if priority_class is not None:
        obj["spec"].setdefault("runPolicy", {}).setdefault("schedulingPolicy", {})["priorityClass"] = (
            priority_class
        )
    if annotation is not None:
        obj["metadata"].setdefault("annotations", {})[PRIORITY_ANNOTATION] = annotation
    return obj


def priority_class(
    name: str, value: int, *, default: bool = False, policy: str | None = None
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": default,
    }
    if policy is not None:
        obj["preemptionPolicy"] = policy
    return obj


def recorded(objects: Objects, name: str) -> dict[str, Any]:
    status: dict[str, Any] = objects.get(FLEET_ASCENDJOB, "default", name)["status"]
    return {k: status.get(k) for k in ("priority", "priorityClassName", "preemptionPolicy")}


def queued_priority(ledger: Ledger, name: str) -> int:
    record = ledger.pending.record(f"default/{name}")
    assert record is not None
    return record.priority


@pytest.fixture
def fleet(fake_redis: redis.Redis) -> tuple[Objects, Ledger]:
    return Objects(fake_redis), Ledger(fake_redis)


def test_a_job_naming_a_class_is_queued_with_its_value_and_policy(fleet: tuple[Objects, Ledger]) -> None:
    objects, ledger = fleet
    objects.create(PRIORITY_CLASS, priority_class("inference-high", 1000, policy="PreemptLowerPriority"))
    objects.create(PRIORITY_CLASS, priority_class("training-low", 100, policy="Never"))
    submit(objects, ledger, job("infer", priority_class="inference-high"))
    submit(objects, ledger, job("train", priority_class="training-low"))
    assert queued_priority(ledger, "infer") == 1000
    assert queued_priority(ledger, "train") == 100
    assert recorded(objects, "infer") == {
        "priority": 1000,
        "priorityClassName": "inference-high",
        "preemptionPolicy": "PreemptLowerPriority",
    }
    assert recorded(objects, "train")["preemptionPolicy"] == "Never"
    assert ledger.pending.peek("root", 10) == ["default/infer", "default/train"]


def test_a_job_naming_an_unknown_class_is_refused_and_nothing_is_written(
    fleet: tuple[Objects, Ledger],
) -> None:
    objects, ledger = fleet
    with pytest.raises(PriorityClassNotFound) as refused:
        submit(objects, ledger, job("orphan", priority_class="gold"))
    assert str(refused.value) == "no PriorityClass with name gold was found"
    assert refused.value.field == FIELD
    assert objects.list(FLEET_ASCENDJOB)[0] == []
    assert ledger.pending.records() == {}


def test_the_global_default_applies_to_a_job_naming_none(fleet: tuple[Objects, Ledger]) -> None:
    objects, ledger = fleet
    objects.create(PRIORITY_CLASS, priority_class("normal", 50, default=True, policy="Never"))
    submit(objects, ledger, job("plain"))
    assert queued_priority(ledger, "plain") == 50
    # as the Priority admission plugin writes the default's name into the pod
    assert recorded(objects, "plain") == {
        "priority": 50,
        "priorityClassName": "normal",
        "preemptionPolicy": "Never",
    }


def test_of_two_defaults_the_lowest_value_wins(fake_redis: redis.Redis) -> None:
    """Two replicas racing may both store a default; the plugin then takes the lowest value."""
    objects = Objects(fake_redis)
    objects.create(PRIORITY_CLASS, priority_class("b", 20, default=True))
    objects.create(PRIORITY_CLASS, priority_class("a", 10, default=True))
    assert resolve(job("x"), PriorityClasses(objects)) == JobPriority(10, "a")


def test_the_annotation_is_the_fallback(fleet: tuple[Objects, Ledger]) -> None:
    objects, ledger = fleet
    submit(objects, ledger, job("annotated", annotation="7"))
    submit(objects, ledger, job("bare"))
    assert queued_priority(ledger, "annotated") == 7
    assert queued_priority(ledger, "bare") == 0
    assert recorded(objects, "annotated") == {
        "priority": 7,
        "priorityClassName": None,
        "preemptionPolicy": "PreemptLowerPriority",
    }


def test_a_class_wins_over_the_annotation_and_so_does_the_default(fake_redis: redis.Redis) -> None:
    objects = Objects(fake_redis)
    classes = PriorityClasses(objects)
    objects.create(PRIORITY_CLASS, priority_class("high", 1000))
    assert resolve(job("both", priority_class="high", annotation="5"), classes).value == 1000
    # the annotation is not read when the class decides, so a bad one does not matter then
    assert resolve(job("both", priority_class="high", annotation="urgent"), classes).value == 1000
    with pytest.raises(InvalidWorkload, match="is not an integer"):
        resolve(job("bad", annotation="urgent"), classes)
    objects.create(PRIORITY_CLASS, priority_class("normal", 50, default=True))
    assert resolve(job("annotated", annotation="5"), classes) == JobPriority(50, "normal")


def test_an_empty_class_name_names_none(fake_redis: redis.Redis) -> None:
    assert resolve(job("empty", priority_class="", annotation="3"), PriorityClasses(Objects(fake_redis))) == (
        JobPriority(3)
    )


def test_priority_is_kept_when_the_class_is_deleted_or_recreated(fleet: tuple[Objects, Ledger]) -> None:
    """The reconcile path: a stored job the ledger lacks is queued with what was recorded."""
    objects, ledger = fleet
    objects.create(PRIORITY_CLASS, priority_class("high", 1000, policy="Never"))
    # stored but not queued: an API replica died between the two steps
    stored = objects.create(FLEET_ASCENDJOB, prepare(job("kept", priority_class="high"), ledger, objects).obj)
    objects.delete(PRIORITY_CLASS, None, "high")
    prepared = enqueue(ledger, stored)
    assert queued_priority(ledger, "kept") == 1000
    assert prepared.resolved == JobPriority(1000, "high", "Never")
    assert job_priority(stored) == JobPriority(1000, "high", "Never")
    objects.create(PRIORITY_CLASS, priority_class("high", 1, default=True))
    assert job_priority(objects.get(FLEET_ASCENDJOB, "default", "kept")).value == 1000
    ledger.release("default/kept")
    enqueue(ledger, objects.get(FLEET_ASCENDJOB, "default", "kept"))
    assert queued_priority(ledger, "kept") == 1000


def test_a_job_stored_before_priorities_were_recorded_keeps_its_annotation() -> None:
    legacy = job("legacy", priority_class="gone", annotation="4")
    legacy["status"] = {"queue": "root", "attempt": 0}
    assert job_priority(legacy) == JobPriority(4)
    del legacy["metadata"]["annotations"]
    assert job_priority(legacy) == JobPriority(0)


def test_classes_applied_elsewhere_are_seen_by_the_next_submission(fake_redis: redis.Redis) -> None:
    """The cache is exact: another replica's write is seen at once, a deletion too."""
    mine, theirs = Objects(fake_redis), Objects(fake_redis)
    classes = priority_classes(mine)
    assert classes is priority_classes(mine)
    assert classes.get("high") is None
    theirs.create(PRIORITY_CLASS, priority_class("high", 1000))
    found = classes.get("high")
    assert found is not None and found.value == 1000
    theirs.delete(PRIORITY_CLASS, None, "high")
    assert classes.get("high") is None
    assert classes.default() is None
    theirs.create(PRIORITY_CLASS, priority_class("normal", 5, default=True))
    default = classes.default()
    assert default is not None and default.name == "normal"


def test_resolution_does_not_reread_the_classes_when_none_changed(
    real_redis: redis.Redis, round_trips: list[int]
) -> None:
    """One small round trip asks whether the kind changed; the classes are read only after a change."""
    objects, ledger = Objects(real_redis), Ledger(real_redis)
    objects.create(PRIORITY_CLASS, priority_class("high", 1000))
    for i in range(20):
        objects.create(PRIORITY_CLASS, priority_class(f"other-{i}", i))
    classes = PriorityClasses(objects)
    assert classes.get("high") is not None  # the first read
    before = round_trips[0]
    for _ in range(5):
        assert resolve(job("x", priority_class="high"), classes).value == 1000
        assert resolve(job("y"), classes).value == 0
    assert round_trips[0] - before == 10
    objects.create(PRIORITY_CLASS, priority_class("normal", 3, default=True))
    before = round_trips[0]
    assert resolve(job("y"), classes) == JobPriority(3, "normal")
    assert round_trips[0] - before == 2  # the check, then the one read of the kind
    submit(objects, ledger, job("warm-up"))
    before = round_trips[0]
    submit(objects, ledger, job("j", priority_class="high"))
    # the tree's version with the PriorityClass check (one MULTI), the create, the queueing with
    # its Event: the check costs a submission no round trip of its own
    assert round_trips[0] - before == 3
    theirs = Objects(real_redis)  # another replica re-creates the class with another value
    theirs.delete(PRIORITY_CLASS, None, "high")
    theirs.create(PRIORITY_CLASS, priority_class("high", 2000))
    before = round_trips[0]
    submit(objects, ledger, job("k", priority_class="high"))
    assert round_trips[0] - before == 4  # the classes read again, once
    assert queued_priority(ledger, "k") == 2000
    before = round_trips[0]
    submit(objects, ledger, job("l", priority_class="high"))
    assert round_trips[0] - before == 3


def test_a_submission_sees_classes_applied_elsewhere_a_moment_ago(fleet: tuple[Objects, Ledger]) -> None:
    """Submission's check, sent with the tree's version, is as exact as a lookup's."""
    objects, ledger = fleet
    theirs = Objects(objects.client)
    with pytest.raises(PriorityClassNotFound):
        submit(objects, ledger, job("early", priority_class="high"))
    theirs.create(PRIORITY_CLASS, priority_class("high", 1000, policy="Never"))
    submit(objects, ledger, job("on-time", priority_class="high"))
    assert recorded(objects, "on-time") == {
        "priority": 1000,
        "priorityClassName": "high",
        "preemptionPolicy": "Never",
    }
    theirs.create(PRIORITY_CLASS, priority_class("normal", 5, default=True))
    submit(objects, ledger, job("plain"))
    assert queued_priority(ledger, "plain") == 5
    theirs.delete(PRIORITY_CLASS, None, "high")
    with pytest.raises(PriorityClassNotFound):
        submit(objects, ledger, job("late", priority_class="high"))
    assert [o["metadata"]["name"] for o in objects.list(FLEET_ASCENDJOB)[0]] == ["on-time", "plain"]


def test_classes_are_read_again_when_the_change_feed_no_longer_reaches_back(
    fake_redis: redis.Redis,
) -> None:
    """A feed trimmed past the version the classes were read at cannot say what changed."""
    objects = Objects(fake_redis)
    classes = PriorityClasses(objects)
    assert classes.get("high") is None
    created = objects.create(PRIORITY_CLASS, priority_class("high", 7))
    # the kind's stream trimmed past the change, as the write script trims it, floor and all
    kind = "scheduling.k8s.io/priorityclasses"
    fake_redis.xtrim(objects.keys.changes(kind), maxlen=0)
    fake_redis.hset(objects.keys.floors, kind, created["metadata"]["resourceVersion"])
    found = classes.get("high")
    assert found is not None and found.value == 7


def test_a_ledger_on_another_client_resolves_classes_too(fake_redis: redis.Redis) -> None:
    """Without a shared client the tree's version and the check go separately, as exact."""
    objects = Objects(fake_redis)
    ledger = Ledger(redis.Redis(connection_pool=fake_redis.connection_pool))
    objects.create(PRIORITY_CLASS, priority_class("high", 1000))
    submit(objects, ledger, job("apart", priority_class="high"))
    assert queued_priority(ledger, "apart") == 1000


def test_a_priority_the_job_writes_itself_is_capped_and_a_class_is_not(fake_redis: redis.Redis) -> None:
    """Issue 34: the annotation's value above the node's ``fleet.io/max-priority`` (or above
    1,000,000,000 anywhere) refuses the job; an admin's class above the cap does not."""
    from fleet.jobs import PriorityNotAllowed
    from queues import load

    ledger, objects = Ledger(fake_redis), Objects(fake_redis)
    tree = """
apiVersion: scheduling.sigs.k8s.io/v1beta1
kind: ElasticQuotaTree
metadata: {name: elasticquotatree, namespace: kube-system}
spec:
  root:
    name: root
    max: {huawei.com/Ascend910: 64}
    min: {huawei.com/Ascend910: 64}
    children:
    - {name: capped, namespaces: [default], attributes: {fleet.io/max-priority: "100"}}
    - {name: free, namespaces: [other]}
"""
    ledger.apply(load(tree)[0])
    objects.create(PRIORITY_CLASS, priority_class("admins-high", 100_000))
    assert prepare(job("at-cap", annotation="100"), ledger, objects).priority == 100
    assert prepare(job("below", annotation="-5"), ledger, objects).priority == -5
    with pytest.raises(PriorityNotAllowed) as above:
        prepare(job("above", annotation="101"), ledger, objects)
    assert above.value.field == f"metadata.annotations[{PRIORITY_ANNOTATION}]"
    assert str(above.value).startswith(
        "priority 101 is above 100, the most the ElasticQuotaTree allows jobs of namespace default there "
        "(attribute fleet.io/max-priority of quota node 'capped')"
    )
    assert prepare(job("classed", priority_class="admins-high"), ledger, objects).priority == 100_000
    elsewhere = job("elsewhere", annotation="2000000000")
    elsewhere["metadata"]["namespace"] = "other"
    with pytest.raises(PriorityNotAllowed) as system:
        prepare(elsewhere, ledger, objects)
    assert "the highest priority a user may define" in str(system.value)
    elsewhere["metadata"]["annotations"][PRIORITY_ANNOTATION] = "1000000000"
    assert prepare(elsewhere, ledger, objects).priority == 1_000_000_000
