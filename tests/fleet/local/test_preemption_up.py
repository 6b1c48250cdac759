"""Preemption end to end: ``fleet up`` started as a process (real Redis, simulated members over
HTTP), driven only with the real kubectl and the kubeconfig it writes, as people use it.

A platform admin applies a quota tree and PriorityClasses (``preemption/``: YAML as Kube Queue and
Kubernetes users write them); users submit variants of a MindCluster-style AscendJob
(``preemption/acjob-910b.yaml``) with ``kubectl apply -n NAMESPACE -f -``, watch them with
``kubectl get acjob`` and ``kubectl describe acjob``, and look at the copies in the members with
``kubectl --context member-N get acjob``. The topology (``preemption/topology.yaml``) has as many
NPUs as the tree's root hands out, so the quota, not capacity, decides; each test has a subtree
and a namespace of its own, so the tests share one ``fleet up``.

While a test runs, an :class:`Observer` polls the fleet's and the members' job lists: each job's
states as ``kubectl get acjob`` showed them, and, on every poll, that no job has two copies in the
members and that no member runs more of a quota node's jobs than it admits (a preempted job's copy
is gone before its preemptor starts).
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest

from tests.fleet.local.test_up import KUBECTL, ROOT, Up, kubectl_env, stop_up, table_rows, wait_ready
from tests.fleet.local.test_up import start_up as start_fleet_up

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent / "preemption"
TOPOLOGY = HERE / "topology.yaml"
TREE = HERE / "elasticquotatree.yaml"
CLASSES = HERE / "priorityclasses.yaml"
NEVER_CLASS = HERE / "priorityclass-never.yaml"
JOB = HERE / "acjob-910b.yaml"
MEMBERS = ("member-1", "member-2")
#: NPUs one job of ``JOB`` takes (a Master and a Worker, 2 NPUs each).
JOB_NPUS = 4
FINISHED = frozenset({"Succeeded", "Failed"})


# ---- fleet up and kubectl --------------------------------------------------------------------


def start_up(tmp_path: Path) -> Up:
    """``fleet up`` with this module's topology."""
    return start_fleet_up(tmp_path, "--topology", str(TOPOLOGY), "--job-seconds", "30")


@dataclass
class Fleet:
    """The running ``fleet up`` and kubectl against it (the ``fleet`` context unless told)."""

    up: Up
    env: dict[str, str]

    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, *args],
            input=stdin,
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        done = self.run(*args, stdin=stdin)
        if check and done.returncode != 0:
            self.fail(f"kubectl {' '.join(args)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
        return done.stdout

    def submit(self, namespace: str, name: str, seconds: float, priority_class: str) -> None:
        """A user's variant of the AscendJob: its name, run time and class changed, as with sed."""
        text = JOB.read_text()
        for old, new in (
            ("resnet50-batch", name),
            ('sim.fleet.io/duration-seconds: "20"', f'sim.fleet.io/duration-seconds: "{seconds:g}"'),
            ("priorityClass: e2e-batch", f"priorityClass: {priority_class}"),
        ):
            assert old in text, (JOB, old)
            text = text.replace(old, new)
        out = self.kubectl("apply", "-n", namespace, "-f", "-", stdin=text)
        assert out.strip() == f"ascendjob.mindxdl.gitee.com/{name} created", out

    def describe(self, namespace: str, name: str) -> str:
        return self.kubectl("describe", "acjob", "-n", namespace, name)

    def overview(self) -> str:
        """What a person would look at when something is off: every job, at the fleet and in the members."""
        parts = [
            "$ kubectl get acjob -A -o wide",
            self.kubectl("get", "acjob", "-A", "-o", "wide", check=False),
        ]
        parts += ["$ kubectl get queues", self.kubectl("get", "queues", check=False)]
        for member in MEMBERS:
            parts += [
                f"$ kubectl --context {member} get acjob -A",
                self.kubectl("--context", member, "get", "acjob", "-A", check=False),
            ]
        return "\n".join(parts)

    def fail(self, message: str) -> NoReturn:
        pytest.fail(f"{message}\n\n{self.overview()}\n\n--- fleet up ---\n{self.up.log()}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """One ``fleet up`` for the module, with the admin's quota tree and PriorityClasses applied."""
    up = start_up(tmp_path_factory.mktemp("preemption-up"))
    try:
        env = kubectl_env(up.kubeconfig)
        wait_ready(up, env)
        running = Fleet(up, env)
        out = running.kubectl("apply", "-f", str(TREE))
        assert out.strip() == "elasticquotatree.scheduling.sigs.k8s.io/elasticquotatree created", out
        out = running.kubectl("apply", "-f", str(CLASSES))
        assert out.split("\n")[:2] == [
            "priorityclass.scheduling.k8s.io/e2e-batch created",
            "priorityclass.scheduling.k8s.io/e2e-urgent created",
        ], out
        yield running
    finally:
        code = stop_up(up)
    assert code == 0, up.log()


# ---- watching it happen ----------------------------------------------------------------------


class Observer:
    """Polls ``kubectl get acjob -A`` at the fleet and ``kubectl --context member-N get acjob -A``
    in each member while a test runs (see the module docstring), for the jobs of ``namespaces``:
    the leaves under one quota node of ``max_npus``."""

    def __init__(self, fleet: Fleet, namespaces: Sequence[str], max_npus: int, interval: float = 0.3) -> None:
        self.fleet = fleet
        self.namespaces = tuple(namespaces)
        #: No member may run more of these namespaces' jobs at once than this many NPUs take.
        self.max_npus = max_npus
        self.interval = interval
        #: Each job's (``namespace/name``) states, in the order kubectl showed them (repeats dropped).
        self.history: dict[str, list[str]] = {}
        #: What the polls found wrong.
        self.problems: list[str] = []
        self.polls = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)

    def __enter__(self) -> Observer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except (Exception, pytest.fail.Exception) as error:  # note it, keep watching
                self.problems.append(f"poll failed: {str(error).splitlines()[0]}")
            self._stop.wait(self.interval)

    def states(self, namespace: str | None = None) -> dict[str, str]:
        """``kubectl get acjob -A``: the STATE of each job of ``namespace`` (the first one when
        not given), every job of the namespaces recorded in :attr:`history`. One call at a time,
        so that the history keeps the order in which the fleet went through them."""
        namespace = namespace or self.namespaces[0]
        with self._lock:
            rows = table_rows(self.fleet.kubectl("get", "acjob", "-A"))
            for row in rows:
                if row.get("NAMESPACE") in self.namespaces:
                    seen = self.history.setdefault(f"{row['NAMESPACE']}/{row['NAME']}", [])
                    if not seen or seen[-1] != row.get("STATE"):
                        seen.append(row.get("STATE", ""))
        return {row["NAME"]: row.get("STATE", "") for row in rows if row.get("NAMESPACE") == namespace}

    def wait_for(self, what: str, check: Callable[[], bool], within: float) -> None:
        deadline = time.monotonic() + within
        while not check():
            if time.monotonic() > deadline:
                self.fleet.fail(f"not within {within:g}s: {what}\n{self.report()}")
            time.sleep(0.3)

    def wait_states(self, want: dict[str, str], within: float, namespace: str | None = None) -> None:
        """Until ``kubectl get acjob`` shows each job of ``want`` (of ``namespace``) in its state."""
        namespace = namespace or self.namespaces[0]
        self.wait_for(
            f"kubectl get acjob -n {namespace} shows {want}",
            lambda: all(self.states(namespace).get(n) == s for n, s in want.items()),
            within,
        )

    def poll(self) -> None:
        self.states()
        where: dict[str, list[str]] = {}
        for member in MEMBERS:
            done = self.fleet.run("--context", member, "get", "acjob", "-A")
            if done.returncode != 0:
                self.problems.append(f"kubectl --context {member} get acjob -A: {done.stderr.strip()}")
                continue
            rows = [r for r in table_rows(done.stdout) if r.get("NAMESPACE") in self.namespaces]
            for row in rows:
                where.setdefault(f"{row['NAMESPACE']}/{row['NAME']}", []).append(member)
            active = [r["NAME"] for r in rows if r.get("STATE") not in FINISHED]
            if len(active) * JOB_NPUS > self.max_npus:
                self.problems.append(
                    f"{member} runs {len(active)} jobs at once ({active}), more than the quota of "
                    f"{self.max_npus} NPUs admits:\n{done.stdout}"
                )
        for job, members in where.items():
            if len(members) > 1:
                self.problems.append(f"{job} has a copy in each of {members} at once")
        self.polls += 1

    def states_of(self, job: str) -> list[str]:
        """What ``kubectl get acjob`` showed of ``namespace/name``, in order."""
        return list(self.history.get(job, []))

    def report(self) -> str:
        lines = [f"kubectl get acjob -A, {self.polls} polls, states seen in order:"]
        lines += [f"  {job}: {' -> '.join(states)}" for job, states in sorted(self.history.items())]
        lines += [f"problem: {problem}" for problem in self.problems]
        return "\n".join(lines)


def in_order(seen: list[str], *states: str) -> bool:
    """Whether ``states`` occur in ``seen`` in this order (others may come between)."""
    remaining = iter(seen)
    return all(any(s == want for s in remaining) for want in states)


def job_events(fleet: Fleet, namespace: str, name: str) -> list[dict[str, str]]:
    """The job's Events as ``kubectl get events`` lists them."""
    listed = fleet.kubectl(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}", "-o", "json"
    )
    return list(json.loads(listed)["items"])


def events(described: str) -> list[str]:
    """The lines of the Events table of ``kubectl describe``."""
    return described.split("\nEvents:", 1)[-1].splitlines()[3:]


def assert_preempted(fleet: Fleet, observer: Observer, namespace: str, victim: str, by: str) -> None:
    """The victim went back to the queue and ran again, and ``describe`` names its preemptor."""
    states = observer.states_of(f"{namespace}/{victim}")
    if not in_order(states, "Running", "Queued", "Running", "Succeeded"):
        fleet.fail(
            f"kubectl get acjob did not show {victim} Running, Queued again, then Running and "
            f"Succeeded: {states}\n{observer.report()}"
        )
    described = fleet.describe(namespace, victim)
    lines = [line for line in events(described) if "Preempted" in line and f"preempted by {by}" in line]
    assert lines and lines[0].split()[0] == "Warning", (
        f"no Preempted event naming {by} on {victim}:\n{described}"
    )
    victim_obj = json.loads(fleet.kubectl("get", "acjob", "-n", namespace, victim, "-o", "json"))
    status = victim_obj["status"]
    assert (status.get("preemptedBy"), status.get("attempt")) == (by, 2), status  # ran again, to the end
    # Its copy was gone (it was back in the queue) before its preemptor was admitted: the two
    # Events kubectl lists say when.
    by_namespace, by_name = by.split("/")
    requeued = [  # the latest Preempted: its copy gone, queued again (one Event, by reason)
        e["lastTimestamp"]
        for e in job_events(fleet, namespace, victim)
        if e["reason"] == "Preempted" and "is gone" in e["message"]
    ]
    admitted = [  # its admission's Event: the binding, as ACK One's scheduler words it
        e["lastTimestamp"]
        for e in job_events(fleet, by_namespace, by_name)
        if e["reason"] == "ScheduleBindingSucceed"
    ]
    assert requeued and admitted and min(requeued) <= max(admitted), (requeued, admitted)


def assert_never_requeued(fleet: Fleet, observer: Observer, namespace: str, name: str) -> None:
    states = observer.states_of(f"{namespace}/{name}")
    if "Queued" in states[states.index("Running") if "Running" in states else 0 :]:
        fleet.fail(f"{name} went back to the queue: {states}\n{observer.report()}")
    described = fleet.describe(namespace, name)
    assert not [line for line in events(described) if "Preempted" in line], described


def assert_all_succeeded(fleet: Fleet, observer: Observer, namespace: str, names: list[str]) -> None:
    observer.wait_states(dict.fromkeys(names, "Succeeded"), 90, namespace)
    observer.poll()  # once more, now that everything is finished
    if observer.problems:
        fleet.fail(f"seen while the jobs ran:\n{observer.report()}")
    # Each job ended with exactly one copy in the members, finished.
    copies: dict[str, list[str]] = {}
    for member in MEMBERS:
        out = fleet.kubectl("--context", member, "get", "acjob", "-n", namespace)
        for row in table_rows(out):
            copies.setdefault(row["NAME"], []).append(f"{member}:{row.get('STATE')}")
    assert sorted(copies) == sorted(names), copies
    assert all(len(found) == 1 and found[0].endswith(":Succeeded") for found in copies.values()), copies


# ---- the tests -------------------------------------------------------------------------------


@pytest.mark.timeout(240)
def test_a_job_of_a_higher_priority_class_preempts_the_newest_batch_job_of_its_queue(fleet: Fleet) -> None:
    ns = "e2e-priority"  # leaf training: 8 NPUs, two batch jobs fill it
    with Observer(fleet, [ns], max_npus=8) as observer:
        fleet.submit(ns, "batch-1", 20, "e2e-batch")
        observer.wait_states({"batch-1": "Running"}, 30)
        fleet.submit(ns, "batch-2", 10, "e2e-batch")
        observer.wait_states({"batch-2": "Running"}, 30)

        fleet.submit(ns, "urgent", 4, "e2e-urgent")
        observer.wait_states({"urgent": "Running"}, 30)
        # The newer of the two batch jobs made room; the older one kept running.
        states = observer.states()
        assert states["batch-1"] == "Running", states
        assert states["batch-2"] in {"Queued", "Rescheduling"}, states
        preempting = [line for line in events(fleet.describe(ns, "urgent")) if "Preempting" in line]
        assert preempting and "e2e-priority/batch-2" in preempting[0], preempting

        assert_all_succeeded(fleet, observer, ns, ["batch-1", "batch-2", "urgent"])
    assert_preempted(fleet, observer, ns, "batch-2", by="e2e-priority/urgent")
    assert_never_requeued(fleet, observer, ns, "batch-1")
    assert_never_requeued(fleet, observer, ns, "urgent")


@pytest.mark.timeout(240)
def test_a_team_below_its_guarantee_reclaims_it_from_the_newest_job_of_the_borrowing_team(
    fleet: Fleet,
) -> None:
    # Subtree teams: 16 NPUs, 8 guaranteed to each team. team-b takes all 16 while team-a is idle.
    a, b = "e2e-team-a", "e2e-team-b"
    b_jobs = [f"train-{i}" for i in range(4)]
    with Observer(fleet, [b, a], max_npus=16) as observer:
        for i, name in enumerate(b_jobs):
            fleet.submit(b, name, 8 if i == 3 else 20, "e2e-batch")
            observer.wait_states({name: "Running"}, 30, b)
        queues = {r["NAME"]: r for r in table_rows(fleet.kubectl("get", "queues"))}
        assert queues["root-teams-team-b"]["BORROWED"] == "huawei.com/Ascend910=8", queues

        # team-a's first job: its quota is lent out, so team-b's newest job gives it back.
        fleet.submit(a, "eval", 4, "e2e-batch")
        observer.wait_states({"eval": "Running"}, 30, a)
        states = observer.states(b)
        assert [states[n] for n in b_jobs[:3]] == ["Running"] * 3, states
        assert states["train-3"] in {"Queued", "Rescheduling"}, states

        assert_all_succeeded(fleet, observer, a, ["eval"])
        assert_all_succeeded(fleet, observer, b, b_jobs)
    assert_preempted(fleet, observer, b, "train-3", by="e2e-team-a/eval")
    reclaim = [line for line in events(fleet.describe(b, "train-3")) if "Preempted" in line]
    assert "reclaiming the guaranteed quota of root-teams-team-a" in reclaim[0], reclaim
    for name in b_jobs[:3]:
        assert_never_requeued(fleet, observer, b, name)
    assert_never_requeued(fleet, observer, a, "eval")


@pytest.mark.timeout(240)
def test_a_class_with_preemption_policy_never_waits_for_room_instead(fleet: Fleet) -> None:
    ns = "e2e-never"  # leaf research: 8 NPUs, two batch jobs fill it
    out = fleet.kubectl("apply", "-f", str(NEVER_CLASS))
    assert out.strip() == "priorityclass.scheduling.k8s.io/e2e-urgent-polite created", out
    with Observer(fleet, [ns], max_npus=8) as observer:
        for name in ("batch-1", "batch-2"):
            fleet.submit(ns, name, 15, "e2e-batch")
            observer.wait_states({name: "Running"}, 30)
        fleet.submit(ns, "polite", 3, "e2e-urgent-polite")
        observer.wait_for(
            "kubectl describe acjob polite says the quota holds it",
            lambda: "QuotaExceeded" in fleet.describe(ns, "polite"),
            20,
        )
        # It keeps waiting while the batch jobs run, though its priority is higher.
        until = time.monotonic() + 4
        while time.monotonic() < until:
            states = observer.states()
            if states != {"batch-1": "Running", "batch-2": "Running", "polite": "Queued"}:
                fleet.fail(f"polite did not wait: {states}\n{observer.report()}")
            time.sleep(0.5)
        assert "Preempting" not in fleet.describe(ns, "polite")

        assert_all_succeeded(fleet, observer, ns, ["batch-1", "batch-2", "polite"])
    for name in ("batch-1", "batch-2", "polite"):
        assert_never_requeued(fleet, observer, ns, name)
    assert in_order(observer.states_of(f"{ns}/polite"), "Queued", "Running", "Succeeded"), observer.report()
