"""The objects a job references, propagated with it when its policy says ``propagateDeps: true``.

Karmada's ``propagateDeps`` (``pkg/dependenciesdistributor`` and ``pkg/util/helper``'s
``GetDependencies`` for pods in karmada-io/karmada) sends the ConfigMaps, Secrets and
ServiceAccounts a workload's pod template names, and the PVCs, along with it, and moves them on
failover. Fleet does the same for the kinds it serves, read from every pod template of the job
(any ``template.spec`` with containers, whatever the job kind):

* ConfigMaps: ``volumes[].configMap``, ``projected.sources[].configMap``, ``envFrom[].configMapRef``
  and ``env[].valueFrom.configMapKeyRef`` of containers and init containers;
* Secrets: the same places (``secret.secretName``, ``secretRef``, ``secretKeyRef``) and
  ``imagePullSecrets``;
* Services: the one named by the pods' ``subdomain`` (the headless Service that gives pods DNS
  names; a Service found only by a label selector is not followed: which jobs it serves is the
  user's reading, not a reference);
* MindCluster's ranktable and fault ConfigMaps, named after the job (``rings-config-<job>``,
  ``reset-config-<job>``, ``fault-config-<job>``: the ascend-operator and the training script
  read them by that name even where the pod template does not mount them), when they exist at
  the fleet.

Each is created in the job's member before the job, updated there when it changes at the fleet
(:func:`sync_companion`), and deleted with the job's copy unless another copy there holds it
(what Fleet made for a copy is listed on it, :data:`COMPANIONS_ANNOTATION`). Fleet marks what
it made with :data:`COMPANION_LABEL` and never overwrites nor deletes an object of the member it
did not make (Karmada's ``conflictResolution: Abort``). A referenced object missing at the fleet
is skipped, with an Event, unless it is ``optional``: in the member the pods wait for it, as
Kubernetes makes them. Nothing here logs an object's data.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from fleet.apiserver import CONFIGMAP, SECRET, SERVICE, ResourceType
from fleet.dispatch.context import Context, policy_for
from fleet.dispatch.handback import COMPONENT
from fleet.jobs import FINISHED, FleetReason, cluster_of, current_state, iter_jobs
from fleet.kinds import FLEET_JOB_KINDS
from fleet.members import Conflict, Member, MemberError, NotFound, safe_message
from fleet.state import record_event
from fleet.workloads import KINDS, member_resource

__all__ = [
    "COMPANIONS_ANNOTATION",
    "COMPANION_LABEL",
    "MINDCLUSTER_CONFIGMAPS",
    "Found",
    "Ref",
    "drop",
    "fetch",
    "held_by",
    "push",
    "references",
    "resync",
    "sync_companion",
]

log = logging.getLogger("fleet.dispatch.companions")

#: On every member object Fleet made for a job: only those are ever replaced or deleted.
COMPANION_LABEL: Final = "fleet.io/companion"
#: On a job's member copy: what Fleet made for it there (``ConfigMap/a,Secret/b``), so that
#: deleting the copy knows what to delete with it, and that nothing else is.
COMPANIONS_ANNOTATION: Final = "fleet.io/companions"
#: The prefixes of the ConfigMaps MindCluster names after a job (``<prefix><job name>``).
MINDCLUSTER_CONFIGMAPS: Final = ("rings-config-", "reset-config-", "fault-config-")
#: Metadata that belongs to the fleet's copy, not to the member's.
_OWN_METADATA: Final = (
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "selfLink",
)
_BY_KIND: Final = {rt.kind: rt for rt in (CONFIGMAP, SECRET, SERVICE)}


@dataclass(frozen=True, order=True)
class Ref:
    """A referenced object: its kind, name, and whether the reference tolerates its absence."""

    kind: str
    name: str
    optional: bool = False

    @property
    def rt(self) -> ResourceType:
        return _BY_KIND[self.kind]


def pod_specs(obj: Any) -> Iterator[Mapping[str, Any]]:
    """Every pod spec in ``obj``: the ``spec`` of any ``template`` whose spec has containers."""
    if isinstance(obj, Mapping):
        template = obj.get("template")
        if isinstance(template, Mapping) and isinstance(template.get("spec"), Mapping):
            spec = template["spec"]
            if isinstance(spec.get("containers"), list):
                yield spec
        for value in obj.values():
            if value is not template:
                yield from pod_specs(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from pod_specs(value)


def _named(value: Any, key: str = "name") -> str | None:
    name = value.get(key) if isinstance(value, Mapping) else None
    return name if isinstance(name, str) and name else None


def _optional(value: Any) -> bool:
    return isinstance(value, Mapping) and value.get("optional") is True


def _from_pod(spec: Mapping[str, Any]) -> Iterator[Ref]:
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, Mapping):
            continue
        if (name := _named(volume.get("configMap"))) is not None:
            yield Ref("ConfigMap", name, _optional(volume.get("configMap")))
        if (name := _named(volume.get("secret"), "secretName")) is not None:
            yield Ref("Secret", name, _optional(volume.get("secret")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if not isinstance(source, Mapping):
                continue
            if (name := _named(source.get("configMap"))) is not None:
                yield Ref("ConfigMap", name, _optional(source.get("configMap")))
            if (name := _named(source.get("secret"))) is not None:
                yield Ref("Secret", name, _optional(source.get("secret")))
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if not isinstance(container, Mapping):
            continue
        for source in container.get("envFrom") or []:
            if not isinstance(source, Mapping):
                continue
            if (name := _named(source.get("configMapRef"))) is not None:
                yield Ref("ConfigMap", name, _optional(source.get("configMapRef")))
            if (name := _named(source.get("secretRef"))) is not None:
                yield Ref("Secret", name, _optional(source.get("secretRef")))
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") if isinstance(env, Mapping) else None
            if not isinstance(value_from, Mapping):
                continue
            if (name := _named(value_from.get("configMapKeyRef"))) is not None:
                yield Ref("ConfigMap", name, _optional(value_from.get("configMapKeyRef")))
            if (name := _named(value_from.get("secretKeyRef"))) is not None:
                yield Ref("Secret", name, _optional(value_from.get("secretKeyRef")))
    for secret in spec.get("imagePullSecrets") or []:
        if (name := _named(secret)) is not None:
            yield Ref("Secret", name, optional=True)  # the kubelet pulls without it
    if isinstance(spec.get("subdomain"), str) and spec["subdomain"]:
        yield Ref("Service", spec["subdomain"], optional=True)


def references(job: Mapping[str, Any]) -> list[Ref]:
    """What ``job`` references (see the module docstring), each once, sorted; a name referenced
    both optionally and not is not optional. MindCluster's ConfigMaps named after the job are
    included optionally: they count when they exist at the fleet."""
    found: dict[tuple[str, str], bool] = {}
    for spec in pod_specs(job.get("spec")):
        for ref in _from_pod(spec):
            found[(ref.kind, ref.name)] = found.get((ref.kind, ref.name), True) and ref.optional
    name = str((job.get("metadata") or {}).get("name") or "")
    for prefix in MINDCLUSTER_CONFIGMAPS:
        found.setdefault(("ConfigMap", f"{prefix}{name}"), True)
    return sorted(Ref(kind, name, optional) for (kind, name), optional in found.items())


def member_body(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The member's copy of a fleet object: its content and labels, the fleet's own metadata
    left out, marked with :data:`COMPANION_LABEL`; a Service leaves its cluster IP to the member
    (a headless one stays headless)."""
    body = {k: v for k, v in obj.items() if k != "status"}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _OWN_METADATA}
    meta["labels"] = {**(meta.get("labels") or {}), COMPANION_LABEL: "true"}
    annotations = dict(meta.get("annotations") or {})
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)  # the fleet's, with data
    meta["annotations"] = annotations
    body["metadata"] = meta
    if obj.get("kind") == "Service" and isinstance(obj.get("spec"), Mapping):
        spec = dict(obj["spec"])
        if spec.get("clusterIP") != "None":
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        body["spec"] = spec
    return body


def _content(obj: Mapping[str, Any]) -> Any:
    """What a member copy must agree on with the fleet's (a Service's addresses aside)."""
    spec = dict(obj.get("spec") or {})
    spec.pop("clusterIP", None)
    spec.pop("clusterIPs", None)
    meta = obj.get("metadata") or {}
    return (
        obj.get("data"),
        obj.get("binaryData"),
        obj.get("type"),
        spec,
        meta.get("labels") or {},
        {k: v for k, v in (meta.get("annotations") or {}).items()},
    )


def apply(client: Member, namespace: str, obj: Mapping[str, Any]) -> str:
    """Make the member hold the fleet object ``obj``: ``created``, ``updated``, ``unchanged``,
    or ``foreign`` (the member has one Fleet did not make, left as it is)."""
    body = member_body(obj)
    kind, name = str(body["kind"]), str(body["metadata"]["name"])
    body["metadata"]["namespace"] = namespace
    try:
        live = client.get_core(kind, namespace, name)
    except NotFound:
        try:
            client.create_core(namespace, body)
            return "created"
        except Conflict:
            live = client.get_core(kind, namespace, name)
    live_meta = live.get("metadata") or {}
    if (live_meta.get("labels") or {}).get(COMPANION_LABEL) != "true":
        return "foreign"
    if _content(live) == _content(body):
        return "unchanged"
    body["metadata"]["resourceVersion"] = live_meta.get("resourceVersion")
    if kind == "Service":
        spec = body.setdefault("spec", {})
        for field in ("clusterIP", "clusterIPs"):
            if field in (live.get("spec") or {}):
                spec[field] = live["spec"][field]
    client.replace_core(namespace, body)
    return "updated"


#: What the fleet holds of jobs' references: (kind, namespace, name) -> the object, or None.
Found = Mapping[tuple[str, str, str], "dict[str, Any] | None"]


def fetch(ctx: Context, jobs: Sequence[Mapping[str, Any]]) -> Found:
    """What the fleet holds of everything ``jobs`` reference, in one round trip: a batch of
    propagations reads its jobs' references together (the sample AscendJob names three
    MindCluster ConfigMaps, read one at a time per job before)."""
    wanted: dict[str, set[tuple[str, str]]] = {}
    for job in jobs:
        namespace = str(job["metadata"]["namespace"])
        for ref in references(job):
            wanted.setdefault(ref.kind, set()).add((namespace, ref.name))
    kinds = sorted(wanted)
    reads = [(_BY_KIND[kind], sorted(wanted[kind])) for kind in kinds]
    found: dict[tuple[str, str, str], dict[str, Any] | None] = {}
    for kind, (_, names), objs in zip(kinds, reads, ctx.objects.get_many_kinds(reads), strict=True):
        for (namespace, name), obj in zip(names, objs, strict=True):
            found[(kind, str(namespace), name)] = obj
    return found


def push(
    ctx: Context, client: Member, job: Mapping[str, Any], *, report: bool = True, found: Found | None = None
) -> list[str]:
    """Create or update in ``client`` what ``job`` references (before the job itself is made);
    returns the ``<Kind>/<name>`` that Fleet holds there for it (not those the member had of its
    own), for :data:`COMPANIONS_ANNOTATION`. A required object missing at the fleet gets an
    Event on the job (``report``). ``found``: what :func:`fetch` read of them (read now if not)."""
    namespace = str(job["metadata"]["namespace"])
    if found is None:
        found = fetch(ctx, [job])
    held: list[str] = []
    done: list[str] = []
    missing: list[str] = []
    for ref in references(job):
        obj = found.get((ref.kind, namespace, ref.name))
        if obj is None:
            if not ref.optional:
                missing.append(f"{ref.kind} {ref.name}")
            continue
        outcome = apply(client, namespace, obj)
        done.append(f"{ref.kind}/{ref.name}: {outcome}")
        if outcome != "foreign":
            held.append(f"{ref.kind}/{ref.name}")
    if missing and report:
        record_event(
            ctx.objects,
            dict(job),
            reason=FleetReason.COMPANION_MISSING,
            message=f"not at the fleet, so not sent to {client.name} with the job: {', '.join(missing)}",
            component=COMPONENT,
            type="Warning",
        )
    if done:
        log.info("event=companions_pushed job=%s/%s member=%s %s", namespace, job["metadata"]["name"],
                 client.name, "; ".join(done))  # fmt: skip
    return held


def held_by(job_copy: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of what Fleet made for a member copy, from its :data:`COMPANIONS_ANNOTATION`."""
    value = ((job_copy.get("metadata") or {}).get("annotations") or {}).get(COMPANIONS_ANNOTATION) or ""
    out: set[tuple[str, str]] = set()
    for entry in str(value).split(","):
        kind, _, name = entry.strip().partition("/")
        if kind in _BY_KIND and name:
            out.add((kind, name))
    return out


def drop(client: Member, namespace: str, job_copy: Mapping[str, Any]) -> list[str]:
    """Delete from ``client`` the objects Fleet made for ``job_copy`` (a member copy just
    deleted) that no other copy there holds. A copy for which Fleet made nothing costs no call
    (a member that is slow or away is not asked in vain)."""
    mine = held_by(job_copy)
    if not mine:
        return []
    own = (job_copy.get("kind"), (job_copy.get("metadata") or {}).get("name"))
    still: set[tuple[str, str]] = set()
    for adapter in KINDS:
        for other in client.list_jobs(member_resource(adapter.resource), namespace=namespace):
            if (other.get("kind"), (other.get("metadata") or {}).get("name")) != own:
                still |= held_by(other)
    dropped: list[str] = []
    for kind, ref in sorted(mine - still):
        try:
            live = client.get_core(kind, namespace, ref)
        except NotFound:
            continue
        if ((live.get("metadata") or {}).get("labels") or {}).get(COMPANION_LABEL) != "true":
            continue
        if client.delete_core(kind, namespace, ref):
            dropped.append(f"{kind}/{ref}")
    return dropped


def users(ctx: Context, namespace: str, ref: Ref) -> Sequence[tuple[str, Mapping[str, Any]]]:
    """The jobs of ``namespace`` placed on a member, whose policy propagates what they
    reference and which reference ``ref``: (member, job)."""
    jobs = [job for rt in FLEET_JOB_KINDS for job in ctx.objects.list(rt, namespace)[0]]
    policies = ctx.policies()
    out: list[tuple[str, Mapping[str, Any]]] = []
    for job in jobs:
        member = cluster_of(job)
        if member is None or current_state(job) in FINISHED:
            continue
        if not policy_for(job, policies).spec.deps:
            continue
        if any((r.kind, r.name) == (ref.kind, ref.name) for r in references(job)):
            out.append((member, job))
    return out


def sync_companion(ctx: Context, kind: str, namespace: str, name: str) -> list[str]:
    """A ConfigMap, Secret or Service changed at the fleet: update it in every member where a
    job that references it runs (deleted at the fleet: members keep theirs until the job goes)."""
    obj = ctx.objects.try_get(_BY_KIND[kind], namespace, name)
    if obj is None:
        return []
    done: list[str] = []
    for member in sorted({m for m, _ in users(ctx, namespace, Ref(kind, name))}):
        try:
            client = ctx.member(member)
        except LookupError:
            continue
        done.append(f"{member}: {apply(client, namespace, obj)}")
    return done


def resync(ctx: Context) -> list[str]:
    """Every placed, unfinished job whose policy propagates its references: make its member hold
    them as the fleet has them now (what changed while no syncer followed the changes). A member
    that cannot be reached is skipped: the next resync, or the job's next attempt, brings them.

    The placed jobs are those of the copies record (:mod:`fleet.state.copies`: a sent attempt's
    entry stays until its copy is known gone), not a list of every job: each syncer's start asks
    for a resync, and with 100,000 queued jobs that list took a worker 5 s of CPU and held them
    all in memory (issue 30)."""
    policies = ctx.policies()
    done: list[str] = []
    for job in iter_jobs(ctx.objects, ctx.copies.jobs()):
        member = cluster_of(job)
        if member is None or current_state(job) in FINISHED or not policy_for(job, policies).spec.deps:
            continue
        try:
            client = ctx.member(member)
            done += [f"{member}: {held}" for held in push(ctx, client, job, report=False)]
        except (LookupError, MemberError) as error:
            log.warning("event=companions_resync_skipped member=%s error=%r", member, safe_message(error))
    return done
