"""The simulated member's own NPU device allocation: which device ids a pod gets, or why none.

A real member runs MindCluster's volcano plugin, which picks the NPUs of a pod by id and writes
them on the pod (``huawei.com/Ascend910: Ascend910-0,Ascend910-1``). The simulator does the same
here, written from MindCluster's sources on its own terms (never from ``fleet.placement``), so it
stays an independent judge of Fleet's placements:

* the handler a pod gets (``component/ascend-for-volcano/internal/npu/factory.go``): its
  ``huawei.com/schedule_policy``, else the ``accelerator-type`` its node selector names, else the
  node's own ``accelerator-type`` (the simulated plugin uses each node's own handler where a
  real one would fall back to its 910 module handler; Fleet documents the same choice);
* which counts the handler takes single-node and distributed, and the largest node a policy's
  handler serves (``MaxNodeNPUNum``; no handler compares the node's ``accelerator-type`` label);
* how it picks ids: 910 modules (``module910x8``) by HCCS ring (0-3, 4-7) in the order
  1, 3, 2, 4 free for one NPU, 2, 4, 3 for two, 4 for four, the whole node for eight; 910B x16
  (``module910bx16``) inside one 8-NPU ring, fullest first, 10/12/14 half in each ring; A3
  (``ascend910a3/base.go``) whole dies of two for even counts, one NPU from the emptiest die;
  Atlas 350 4P meshes (``chip4nodex``); soft share (``chip1softsharedev``) a share of one chip's
  100 units; everything else the lowest free ids.

Free devices are kept as one integer per node (bit ``i``: device ``i`` free; soft share: each
chip's free units packed 7 bits a chip), so the scheduler's search can copy and compare them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "DEVICE_ANNOTATION",
    "Handler",
    "annotation",
    "handler_for",
    "is_share_node",
    "mask_of",
    "node_devices",
    "parse_annotation",
    "pick",
    "policy_reason",
    "size_reason",
    "take",
]

#: The pod annotation the plugin writes (the resource name) and its value's prefix.
DEVICE_ANNOTATION: Final = "huawei.com/Ascend910"
_PREFIX: Final = "Ascend910-"
_SHARE_LABEL: Final = "huawei.com/scheduler.chip1softsharedev.enable"
_UNITS_PER_CHIP: Final = 100


@dataclass(frozen=True)
class Handler:
    """One plugin handler as the simulator knows it."""

    name: str
    #: How ids are picked: ``hccs`` (910 rings of 4), ``hccs16`` (910B x16 rings of 8), ``die``
    #: (A3 pairs), ``mesh`` (4P meshes), ``share`` (soft share units), ``flat`` (lowest ids).
    pick: str
    single: frozenset[int]
    multi: frozenset[int]
    #: The node accelerator-types that select this handler by label (documentation only: a
    #: policy's handler never reads the node's label) and the most NPUs a node may offer it
    #: (``MaxNodeNPUNum``; 0: any).
    types: frozenset[str] = frozenset()
    node_size: int = 0


def _r(lo: int, hi: int, step: int = 1) -> frozenset[int]:
    return frozenset(range(lo, hi + 1, step))


_EVEN16 = _r(2, 16, 2)
_HANDLERS: Final[dict[str, Handler]] = {
    "module": Handler(
        "module", "hccs", frozenset({1, 2, 4, 8}), frozenset({1, 2, 4, 8}), frozenset({"module"}), 8
    ),
    "half": Handler("half", "hccs", frozenset({1, 2, 4}), frozenset({1, 2, 4}), frozenset({"half"}), 4),
    "card": Handler("card", "flat", _r(1, 8), _r(1, 8), node_size=8),
    "module-910b-8": Handler("module-910b-8", "flat", _r(1, 8), _r(1, 8), frozenset({"module-910b-8"}), 8),
    "module-910b-16": Handler(
        "module-910b-16",
        "hccs16",
        _r(1, 16) - {9, 11, 13, 15},
        _r(1, 16) - {9, 11, 13, 15},
        frozenset({"module-910b-16"}),
        16,
    ),
    "module-a3-16": Handler("module-a3-16", "die", _EVEN16 | {1}, _EVEN16, frozenset({"module-a3-16"}), 16),
    "a3-8": Handler(
        "a3-8", "die", _r(2, 8, 2) | {1}, _r(2, 8, 2), frozenset({"module-a3-8", "module-a3-8-super-pod"}), 16
    ),
    "a3-16-sp": Handler("a3-16-sp", "die", _EVEN16 | {1}, _EVEN16, frozenset({"module-a3-16-super-pod"}), 16),
    "a3-8-sp": Handler(
        "a3-8-sp", "die", _r(2, 8, 2) | {1}, _r(2, 8, 2), frozenset({"module-a3-8-super-pod"}), 8
    ),
    "4p-8": Handler("4p-8", "mesh", _r(1, 8), _r(1, 8), node_size=8),
    "4p-16": Handler("4p-16", "mesh", _r(1, 16), _r(1, 16), node_size=16),
    "1p-8": Handler("1p-8", "flat", _r(1, 8), _r(1, 8), node_size=8),
    "1p-16": Handler("1p-16", "flat", _r(1, 16), _r(1, 16), node_size=16),
    "850-sp": Handler("850-sp", "flat", frozenset({1, 2, 4, 8}), frozenset({8}), node_size=8),
    "950-sp": Handler("950-sp", "flat", _r(1, 8), frozenset({8}), node_size=8),
    "soft-share": Handler("soft-share", "share", _r(1, 100), _r(1, 100)),
}

#: common/util/constants.go's schedule_policy values -> factory.go's handler.
_BY_POLICY: Final[dict[str, Handler | None]] = {
    "chip1-node2": _HANDLERS["card"],
    "chip4-node4": _HANDLERS["half"],
    "chip8-node8": _HANDLERS["module-910b-8"],
    "chip8-node16": _HANDLERS["module-910b-16"],
    "chip2-node16": _HANDLERS["module-a3-16"],
    "module-a3-16": _HANDLERS["module-a3-16"],
    "chip2-node16-sp": _HANDLERS["a3-16-sp"],
    "chip2-node8": _HANDLERS["a3-8"],
    "chip2-node8-sp": _HANDLERS["a3-8-sp"],
    "chip4-node8": _HANDLERS["4p-8"],
    "chip4-node16": _HANDLERS["4p-16"],
    "chip1-node8": _HANDLERS["1p-8"],
    "chip1-node16": _HANDLERS["1p-16"],
    "chip8-node8-sp": _HANDLERS["850-sp"],
    "chip8-node8-ra64-sp": _HANDLERS["950-sp"],
    "chip1-softShareDev": _HANDLERS["soft-share"],
    "multilevel": None,
}


def _by_type(accel: str | None, labels: Mapping[str, str]) -> Handler | None:
    if labels.get(_SHARE_LABEL) == "true":
        return _HANDLERS["soft-share"]
    if accel is None:
        return None
    if accel in ("module", "half", "module-910b-8", "module-910b-16", "module-a3-16"):
        return _HANDLERS[accel]
    if accel == "module-a3-16-super-pod":
        return _HANDLERS["a3-16-sp"]
    if accel == "module-a3-8-super-pod":
        return _HANDLERS["a3-8-sp"]
    return _HANDLERS["card"] if "card" in accel else None


def handler_for(policy: str | None, selected: str | None, node_labels: Mapping[str, str]) -> Handler | None:
    """The handler a pod gets on a node (``None``: no NPU rules apply)."""
    if policy in _BY_POLICY:
        return _BY_POLICY[policy]
    if selected is not None:
        return _by_type(selected, {})
    return _by_type(node_labels.get("accelerator-type"), node_labels)


def policy_reason(policy: str | None, node_labels: Mapping[str, str], node_npus: int) -> str | None:
    """Why a policy's handler does not serve this node (wrong type or size, soft share closed)."""
    handler = _BY_POLICY.get(policy or "")
    if node_labels.get(_SHARE_LABEL) == "true" and (handler is None or handler.pick != "share"):
        return "node(s) offer soft-shared NPUs only"
    if handler is None:
        return None
    if handler.pick == "share":
        if node_labels.get(_SHARE_LABEL) != "true":
            return f"node(s) are not open to soft sharing ({_SHARE_LABEL})"
        return None
    # The handler reads the node's devices, never its accelerator-type label: a node is refused
    # only when it offers more NPUs than the handler's MaxNodeNPUNum (base/node.go).
    if handler.node_size and node_npus > handler.node_size:
        return f"node(s) didn't match huawei.com/schedule_policy {policy}"
    return None


def size_reason(handler: Handler, npus: int, pods_in_job: int) -> str | None:
    """The plugin's ValidNPUJob verdict on one pod's NPU count."""
    allowed = handler.single if pods_in_job <= 1 else handler.multi
    if npus in allowed:
        return None
    kind = "single-pod" if pods_in_job <= 1 else f"{pods_in_job}-pod"
    shown = sorted(allowed)
    text = ", ".join(str(s) for s in shown) if len(shown) <= 9 else f"{shown[0]}..{shown[-1]}"
    return f"handler {handler.name} takes {text} huawei.com/Ascend910 per pod of a {kind} job, not {npus}"


# ---- device state ------------------------------------------------------------------------------


_BITS: Final = 7  # soft share units per chip (0..100) packed 7 bits a chip


def is_share_node(labels: Mapping[str, str]) -> bool:
    return labels.get(_SHARE_LABEL) == "true"


def node_devices(share: bool, npus: int) -> int:
    """A node's device state when all is free: a bit mask of ``npus`` ids, or (soft share) the
    free units of each chip packed 7 bits a chip (the node offers 100 units a chip)."""
    if share:
        return sum(_UNITS_PER_CHIP << (_BITS * c) for c in range(npus // _UNITS_PER_CHIP))
    return (1 << npus) - 1


def _units(state: int, chips: int) -> list[int]:
    return [state >> (_BITS * c) & ((1 << _BITS) - 1) for c in range(chips)]


def mask_of(ids: tuple[int, ...]) -> int:
    mask = 0
    for i in ids:
        mask |= 1 << i
    return mask


def _free(mask: int, lo: int, hi: int) -> list[int]:
    return [i for i in range(lo, hi) if mask >> i & 1]


def _ring_pick(mask: int, npus: int, ring: int, rings: int, order: tuple[int, ...]) -> tuple[int, ...] | None:
    members = [_free(mask, r * ring, (r + 1) * ring) for r in range(rings)]
    for wanted in order:
        for ids in members:
            if len(ids) == wanted and len(ids) >= npus:
                return tuple(ids[:npus])
    return None


_MODULE_ORDER: Final = {1: (1, 3, 2, 4), 2: (2, 4, 3), 4: (4,)}


def pick(handler: Handler, free: int, npus: int, size: int, share: bool = False) -> tuple[int, ...] | None:
    """The ids (soft share: the one chip) a pod of ``npus`` gets from ``free``, or ``None``."""
    if share:
        units = _units(free, size // _UNITS_PER_CHIP)
        fitting = [c for c, u in enumerate(units) if u >= npus]
        return (min(fitting, key=lambda c: (units[c], c)),) if fitting else None
    ids = _free(free, 0, size)
    if len(ids) < npus:
        return None
    if npus == size:
        return tuple(ids) if len(ids) == size else None
    if handler.pick == "hccs":
        rings = max(size // 4, 1)
        return _ring_pick(free, npus, 4, rings, _MODULE_ORDER.get(npus, ()))
    if handler.pick == "hccs16":
        half = size // 2
        if npus <= half:
            return _ring_pick(free, npus, half, 2, tuple(range(npus, half + 1)))
        left, right = _free(free, 0, half), _free(free, half, size)
        if npus % 2 or min(len(left), len(right)) * 2 < npus:
            return None
        return tuple(left[: npus // 2] + right[: npus // 2])
    if handler.pick == "die":
        dies = [_free(free, d * 2, d * 2 + 2) for d in range(size // 2)]
        if npus == 1:
            open_dies = sorted((d for d in dies if d), key=len)
            return (open_dies[0][0],) if open_dies else None
        whole = [d for d in dies if len(d) == 2]
        if len(whole) * 2 < npus:
            return None
        return tuple(i for d in whole[: npus // 2] for i in d)
    if handler.pick == "mesh":
        meshes = [_free(free, m * 4, m * 4 + 4) for m in range(size // 4)]
        if npus < 4:
            candidates = [m for m in meshes if len(m) >= npus]
            return tuple(min(candidates, key=len)[:npus]) if candidates else None
        if npus % 4 == 0:
            full = [m for m in meshes if len(m) == 4]
            if len(full) * 4 < npus:
                return None
            return tuple(i for m in full[: npus // 4] for i in m)
    return tuple(ids[:npus])


def take(free: int, ids: tuple[int, ...], npus: int, sign: int, share: bool = False) -> int:
    """``free`` after a pod takes (``sign`` 1) or gives back (-1) ``ids`` (soft share: ``npus`` units)."""
    if share:
        return free - sign * npus * (1 << (_BITS * ids[0])) if ids else free
    mask = mask_of(ids)
    return free & ~mask if sign > 0 else free | mask


def annotation(ids: tuple[int, ...]) -> str:
    """The value the plugin writes on the pod."""
    return ",".join(f"{_PREFIX}{i}" for i in ids)


def parse_annotation(value: str | None) -> tuple[int, ...]:
    out = []
    for part in (value or "").split(","):
        tail = part.strip().removeprefix(_PREFIX)
        if tail.isdigit():
            out.append(int(tail))
    return tuple(out)
