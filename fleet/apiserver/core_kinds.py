"""The core/v1 kinds a Kubernetes-style server of Fleet serves: Namespace, Node, Pod, Event.

The simulated members serve them with the job kinds (:func:`fleet.sim.member_registry`); the
fleet endpoint serves Namespace and Event (:mod:`fleet.kinds`). Each is a
:class:`~fleet.apiserver.resources.ResourceType` with the Table columns ``kubectl get`` shows for
it on a real cluster, the field selectors kubectl relies on (``describe node`` lists
pods by ``spec.nodeName``; ``describe`` lists events by ``involvedObject.*``), and the strategic
merge patch keys of the Kubernetes types for the fields that kubectl patches.
"""

from __future__ import annotations

from typing import Any, Final

from fleet.apiserver.errors import Cause
from fleet.apiserver.patch import MergeRule
from fleet.apiserver.resources import Obj, PrinterColumn, ResourceType
from fleet.apiserver.tables import json_path, since
from fleet.apiserver.validation import dns1123_label, invalid, required

__all__ = ["EVENT", "NAMESPACE", "NODE", "POD"]

_NAME = PrinterColumn(
    "Name", "string", ".metadata.name", "Name must be unique within a namespace.", format="name"
)
_AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)

_METADATA_RULES: Final = {
    "metadata.finalizers": MergeRule(),
    "metadata.ownerReferences": MergeRule("uid"),
}


def _container_rules(prefix: str) -> dict[str, MergeRule]:
    return {
        prefix: MergeRule("name"),
        f"{prefix}.env": MergeRule("name"),
        f"{prefix}.ports": MergeRule("containerPort"),
        f"{prefix}.volumeMounts": MergeRule("mountPath"),
        f"{prefix}.volumeDevices": MergeRule("devicePath"),
    }


_POD_RULES: Final = {
    **_METADATA_RULES,
    **_container_rules("spec.containers"),
    **_container_rules("spec.initContainers"),
    **_container_rules("spec.ephemeralContainers"),
    "spec.volumes": MergeRule("name", retain_keys=True),
    "spec.imagePullSecrets": MergeRule("name"),
    "spec.hostAliases": MergeRule("ip"),
    "spec.topologySpreadConstraints": MergeRule("topologyKey"),
    "spec.schedulingGates": MergeRule("name"),
    "spec.resourceClaims": MergeRule("name", retain_keys=True),
    "status.conditions": MergeRule("type"),
    "status.podIPs": MergeRule("ip"),
    "status.hostIPs": MergeRule("ip"),
}

_NODE_RULES: Final = {
    **_METADATA_RULES,
    "spec.podCIDRs": MergeRule(),
    "status.conditions": MergeRule("type"),
    "status.addresses": MergeRule("type"),
}

_NAMESPACE_RULES: Final = {**_METADATA_RULES, "status.conditions": MergeRule("type")}


# --- Namespace ----------------------------------------------------------------------------------


def _validate_namespace(obj: Obj) -> list[Cause]:
    """A namespace's name is a DNS-1123 label, not a subdomain: no dots (kube-apiserver's
    ``ValidateNamespaceName``, ``pkg/apis/core/validation``)."""
    name = obj.get("metadata", {}).get("name")
    why = dns1123_label(name) if isinstance(name, str) and name else None
    return [invalid("metadata.name", name, why)] if why else []


def _prepare_namespace(obj: Obj) -> None:
    obj["status"] = {"phase": "Active"}
    spec = obj.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("finalizers", ["kubernetes"])


NAMESPACE: Final = ResourceType(
    group="",
    version="v1",
    kind="Namespace",
    plural="namespaces",
    singular="namespace",
    namespaced=False,
    short_names=("ns",),
    printer_columns=(
        _NAME,
        PrinterColumn("Status", "string", ".status.phase", "The status of the namespace"),
        PrinterColumn("Age", "string", ".metadata.creationTimestamp", _AGE_DESCRIPTION),
    ),
    has_status=True,
    table_row=lambda obj: [
        obj["metadata"]["name"],
        json_path(obj, ".status.phase") or "",
        since(obj["metadata"].get("creationTimestamp")),
    ],
    field_selectors=("status.phase",),
    strategic=_NAMESPACE_RULES,
    validate=_validate_namespace,
    prepare_create=_prepare_namespace,
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
)


# --- Secret -------------------------------------------------------------------------------------

# --- Node ---------------------------------------------------------------------------------------

_ROLE_PREFIX = "node-role.kubernetes.io/"


def node_status(obj: Obj) -> str:
    """``Ready``, ``NotReady`` or ``Unknown``, plus ``,SchedulingDisabled`` when cordoned."""
    conditions = json_path(obj, ".status.conditions") or []
    ready = next((c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"), None)
    state = "Unknown" if ready is None else "Ready" if ready.get("status") == "True" else "NotReady"
    if json_path(obj, ".spec.unschedulable"):
        state += ",SchedulingDisabled"
    return state


def _node_roles(obj: Obj) -> str:
    labels: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    roles = sorted(
        {key[len(_ROLE_PREFIX) :] for key in labels if key.startswith(_ROLE_PREFIX) and key != _ROLE_PREFIX}
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    return ",".join(roles) if roles else "<none>"


def _node_address(obj: Obj, kind: str) -> str:
    for address in json_path(obj, ".status.addresses") or []:
        if isinstance(address, dict) and address.get("type") == kind:
            return str(address.get("address", "<none>"))
    return "<none>"


def _node_row(obj: Obj) -> list[Any]:
    info = json_path(obj, ".status.nodeInfo") or {}
    return [
        obj["metadata"]["name"],
        node_status(obj),
        _node_roles(obj),
        since(obj["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        _node_address(obj, "InternalIP"),
        _node_address(obj, "ExternalIP"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


NODE: Final = ResourceType(
    group="",
    version="v1",
    kind="Node",
    plural="nodes",
    singular="node",
    namespaced=False,
    short_names=("no",),
    printer_columns=(
        _NAME,
        PrinterColumn("Status", "string", description="The status of the node"),
        PrinterColumn("Roles", "string", description="The roles of the node"),
        PrinterColumn("Age", "string", description=_AGE_DESCRIPTION),
        PrinterColumn("Version", "string", description="Kubelet Version reported by the node."),
        PrinterColumn("Internal-IP", "string", description="List of internal IPs.", priority=1),
        PrinterColumn("External-IP", "string", description="List of external IPs.", priority=1),
        PrinterColumn("OS-Image", "string", description="OS Image reported by the node.", priority=1),
        PrinterColumn(
            "Kernel-Version", "string", description="Kernel Version reported by the node.", priority=1
        ),
        PrinterColumn("Container-Runtime", "string", description="Container Runtime Version.", priority=1),
    ),
    has_status=True,
    status_on_create=True,
    table_row=_node_row,
    field_selectors=("spec.unschedulable",),
    strategic=_NODE_RULES,
)


# --- Pod ----------------------------------------------------------------------------------------


def pod_status_reason(obj: Obj) -> str:
    """The STATUS column of ``kubectl get pods``: phase, or the reason a container gives."""
    status = obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or "Unknown"
    for container in status.get("containerStatuses") or []:
        state = container.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated"):
            terminated = state["terminated"]
            reason = terminated.get("reason") or (
                f"Signal:{terminated['signal']}"
                if terminated.get("signal")
                else f"ExitCode:{terminated.get('exitCode', 0)}"
            )
    if obj.get("metadata", {}).get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return str(reason)


def _pod_row(obj: Obj) -> list[Any]:
    status = obj.get("status") or {}
    containers = json_path(obj, ".spec.containers") or []
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    gates = json_path(obj, ".spec.readinessGates") or []
    return [
        obj["metadata"]["name"],
        f"{ready}/{len(containers)}",
        pod_status_reason(obj),
        restarts,
        since(obj["metadata"].get("creationTimestamp")),
        status.get("podIP") or "<none>",
        json_path(obj, ".spec.nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _validate_pod(obj: Obj) -> list[Cause]:
    containers = json_path(obj, ".spec.containers")
    if not isinstance(containers, list) or not containers:
        return [required("spec.containers")]
    causes: list[Cause] = []
    for i, container in enumerate(containers):
        field = f"spec.containers[{i}]"
        if not isinstance(container, dict):
            causes.append(invalid(field, container, "must be an object"))
            continue
        name = container.get("name")
        if not name:
            causes.append(required(f"{field}.name"))
        elif not isinstance(name, str) or dns1123_label(name):
            causes.append(invalid(f"{field}.name", name, dns1123_label(str(name)) or "must be a string"))
        if not container.get("image"):
            causes.append(required(f"{field}.image"))
    return causes


def _prepare_pod(obj: Obj) -> None:
    obj["status"] = {"phase": "Pending"}


POD: Final = ResourceType(
    group="",
    version="v1",
    kind="Pod",
    plural="pods",
    singular="pod",
    namespaced=True,
    short_names=("po",),
    printer_columns=(
        _NAME,
        PrinterColumn(
            "Ready", "string", description="The aggregate readiness state of this pod for accepting traffic."
        ),
        PrinterColumn("Status", "string", description="The aggregate status of the containers in this pod."),
        PrinterColumn(
            "Restarts",
            "integer",
            description="The number of times the containers in this pod have been restarted.",
        ),
        PrinterColumn("Age", "string", description=_AGE_DESCRIPTION),
        PrinterColumn("IP", "string", description="IP address allocated to the pod.", priority=1),
        PrinterColumn("Node", "string", description="Name of the node this pod is assigned to.", priority=1),
        PrinterColumn("Nominated Node", "string", description="Node nominated by the scheduler.", priority=1),
        PrinterColumn("Readiness Gates", "string", description="Pod readiness gates.", priority=1),
    ),
    has_status=True,
    validate=_validate_pod,
    table_row=_pod_row,
    field_selectors=(
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "status.phase",
        "status.podIP",
    ),
    strategic=_POD_RULES,
    prepare_create=_prepare_pod,
    categories=("all",),
)


# --- Event --------------------------------------------------------------------------------------


def _event_row(obj: Obj) -> list[Any]:
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or obj.get("firstTimestamp")
    first = obj.get("firstTimestamp") or obj.get("eventTime")
    source = obj.get("source") or {}
    return [
        since(last),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        str(obj.get("message", "")).strip(),
        involved.get("fieldPath", ""),
        ", ".join(v for v in (source.get("component", ""), source.get("host", "")) if v),
        since(first),
        obj.get("count", 1),
        obj["metadata"]["name"],
    ]


def _validate_event(obj: Obj) -> list[Cause]:
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict) or not involved.get("name"):
        return [required("involvedObject")]
    namespace = obj.get("metadata", {}).get("namespace")
    if involved.get("namespace") and involved["namespace"] != namespace:
        return [invalid("involvedObject.namespace", involved["namespace"], "does not match event.namespace")]
    return []


EVENT: Final = ResourceType(
    group="",
    version="v1",
    kind="Event",
    plural="events",
    singular="event",
    namespaced=True,
    short_names=("ev",),
    printer_columns=(
        PrinterColumn("Last Seen", "string", description="Time when this Event was last seen."),
        PrinterColumn("Type", "string", description="Type of this event (Normal, Warning)."),
        PrinterColumn("Reason", "string", description="Why the action was taken."),
        PrinterColumn("Object", "string", description="The object that this event is about."),
        PrinterColumn(
            "Message", "string", description="A human-readable description of the status of this operation."
        ),
        PrinterColumn("Subobject", "string", description="The subobject this event is about.", priority=1),
        PrinterColumn("Source", "string", description="The component reporting this event.", priority=1),
        PrinterColumn(
            "First Seen", "string", description="The time at which the event was first recorded.", priority=1
        ),
        PrinterColumn(
            "Count", "integer", description="The number of times this event has occurred.", priority=1
        ),
        PrinterColumn("Name", "string", description="Name of the event.", priority=1, format="name"),
    ),
    strict=False,
    validate=_validate_event,
    table_row=_event_row,
    field_selectors=(
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    strategic=_METADATA_RULES,
)
