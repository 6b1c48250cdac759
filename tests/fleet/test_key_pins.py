"""The key names and the Lua locals of every key set, pinned as they were before the key sets
were derived from one declaration per key: data already in Redis and the scripts' names must not move."""

from __future__ import annotations

import pytest

from fleet.endpoint.keys import ApiKeys
from fleet.placement import ReservationKeys
from fleet.state import DispatchKeys, StateKeys
from queues import Keys, KeySpace

#: ``<set>(prefix="blue").lua()``, line by line.
LUA: dict[type[KeySpace], tuple[str, ...]] = {
    Keys: (
        "local BASE = 'blue:{quota}:'\n",
        "local K_META = BASE .. 'meta'\n",
        "local K_NODES = BASE .. 'nodes'\n",
        "local K_SEQ = BASE .. 'seq'\n",
        "local K_PENDING = BASE .. 'pending'\n",
        "local K_ADMITTED = BASE .. 'admitted'\n",
        "local K_PARKED = BASE .. 'parked'\n",
        "local K_QVERSIONS = BASE .. 'qversions'\n",
        "local K_WAKE = BASE .. 'wake'\n",
        "local function k_node(name) return BASE .. 'node:' .. name end\n",
        "local function k_queue(name) return BASE .. 'queue:' .. name end\n",
        "local function k_parked(leaf) return BASE .. 'parked:' .. leaf end\n",
        "local function k_classes(leaf) return BASE .. 'classes:' .. leaf end\n",
        "local function k_cqueue(leaf, cls) return BASE .. 'cqueue:' .. leaf .. '|' .. cls end\n",
        "local function k_running(leaf) return BASE .. 'running:' .. leaf end\n",
    ),
    StateKeys: (
        "local BASE = 'blue:{quota}:state:'\n",
        "local K_VERSION = BASE .. 'version'\n",
        "local K_FLOORS = BASE .. 'floors'\n",
        "local function k_objects(kind) return BASE .. 'objects:' .. kind end\n",
        "local function k_versions(kind) return BASE .. 'versions:' .. kind end\n",
        "local function k_changes(kind) return BASE .. 'changes:' .. kind end\n",
        "local function k_index(kind) return BASE .. 'index:' .. kind end\n",
        "local function k_involved(kind) return BASE .. 'involved:' .. kind end\n",
        "local function k_reindex(index, kind) return BASE .. 'reindex:' .. index .. ':' .. kind end\n",
        "local function index_member(field)\n",
        "  local at = string.find(field, '/', 1, true)\n",
        "  if not at then return field end\n",
        "  return string.sub(field, 1, at - 1) .. '\\0' .. string.sub(field, at + 1)\n",
        "end\n",
        "local function member_field(member)\n",
        "  local at = string.find(member, '\\0', 1, true)\n",
        "  if not at then return member end\n",
        "  return string.sub(member, 1, at - 1) .. '/' .. string.sub(member, at + 1)\n",
        "end\n",
    ),
    DispatchKeys: ("local BASE = 'blue:{quota}:dispatch:'\n",),
    ApiKeys: ("local BASE = 'blue:{quota}:api:'\n",),
    ReservationKeys: (
        "local BASE = KEYS[1]\n",
        "local K_HELD = BASE .. 'held'\n",
        "local K_ITEMS = BASE .. 'items'\n",
        "local K_EXPIRY = BASE .. 'expiry'\n",
        "local K_VERSION = BASE .. 'version'\n",
        "local function k_takes(id) return BASE .. 'takes:' .. id end\n",
    ),
}


@pytest.mark.parametrize("key_set", list(LUA), ids=lambda c: c.__name__)
def test_the_lua_locals_are_unchanged(key_set: type[KeySpace]) -> None:
    assert key_set(prefix="blue").lua() == "".join(LUA[key_set])


def test_the_key_names_are_unchanged() -> None:
    keys, state, dispatch, api, res = Keys(), StateKeys(), DispatchKeys(), ApiKeys(), ReservationKeys()
    names = {
        "keys.meta": keys.meta,
        "keys.nodes": keys.nodes,
        "keys.seq": keys.seq,
        "keys.pending": keys.pending,
        "keys.admitted": keys.admitted,
        "keys.parked": keys.parked,
        "keys.parked_queue('l')": keys.parked_queue("l"),
        "keys.queue_versions": keys.queue_versions,
        "keys.node('n')": keys.node("n"),
        "keys.queue('n')": keys.queue("n"),
        "keys.classes('l')": keys.classes("l"),
        "keys.class_queue('l', 'c')": keys.class_queue("l", "c"),
        "keys.running('l')": keys.running("l"),
        "state.version": state.version,
        "state.floors": state.floors,
        "state.objects('k')": state.objects("k"),
        "state.versions('k')": state.versions("k"),
        "state.changes('k')": state.changes("k"),
        "state.index('k')": state.index("k"),
        "state.involved('k')": state.involved("k"),
        "state.reindex('i', 'k')": state.reindex("i", "k"),
        "dispatch.lease": dispatch.lease,
        "dispatch.inflight": dispatch.inflight,
        "dispatch.left": dispatch.left,
        "dispatch.held": dispatch.held,
        "dispatch.health": dispatch.health,
        "dispatch.capacity": dispatch.capacity,
        "dispatch.capacity_nodes": dispatch.capacity_nodes,
        "dispatch.syncers": dispatch.syncers,
        "dispatch.owners": dispatch.owners,
        "dispatch.degraded": dispatch.degraded,
        "dispatch.queue('propagate')": dispatch.queue("propagate"),
        "api.tree_lock": api.tree_lock,
        "api.durability_marker": api.durability_marker,
        "api.console_session('d')": api.console_session("d"),
        "res.member_base('m')": res.member_base("m"),
        "res.member('m').held": res.member("m").held,
        "res.member('m').items": res.member("m").items,
        "res.member('m').expiry": res.member("m").expiry,
        "res.member('m').version": res.member("m").version,
        "res.member('m').takes('r')": res.member("m").takes("r"),
    }
    assert names == {
        "keys.meta": "fleet:{quota}:meta",
        "keys.nodes": "fleet:{quota}:nodes",
        "keys.seq": "fleet:{quota}:seq",
        "keys.pending": "fleet:{quota}:pending",
        "keys.admitted": "fleet:{quota}:admitted",
        "keys.parked": "fleet:{quota}:parked",
        "keys.parked_queue('l')": "fleet:{quota}:parked:l",
        "keys.queue_versions": "fleet:{quota}:qversions",
        "keys.node('n')": "fleet:{quota}:node:n",
        "keys.queue('n')": "fleet:{quota}:queue:n",
        "keys.classes('l')": "fleet:{quota}:classes:l",
        "keys.class_queue('l', 'c')": "fleet:{quota}:cqueue:l|c",
        "keys.running('l')": "fleet:{quota}:running:l",
        "state.version": "fleet:{quota}:state:version",
        "state.floors": "fleet:{quota}:state:floors",
        "state.objects('k')": "fleet:{quota}:state:objects:k",
        "state.versions('k')": "fleet:{quota}:state:versions:k",
        "state.changes('k')": "fleet:{quota}:state:changes:k",
        "state.index('k')": "fleet:{quota}:state:index:k",
        "state.involved('k')": "fleet:{quota}:state:involved:k",
        "state.reindex('i', 'k')": "fleet:{quota}:state:reindex:i:k",
        "dispatch.lease": "fleet:{quota}:dispatch:lease",
        "dispatch.inflight": "fleet:{quota}:dispatch:inflight",
        "dispatch.left": "fleet:{quota}:dispatch:left",
        "dispatch.held": "fleet:{quota}:dispatch:held",
        "dispatch.health": "fleet:{quota}:dispatch:health",
        "dispatch.capacity": "fleet:{quota}:dispatch:capacity",
        "dispatch.capacity_nodes": "fleet:{quota}:dispatch:capacity-nodes",
        "dispatch.syncers": "fleet:{quota}:dispatch:syncers",
        "dispatch.owners": "fleet:{quota}:dispatch:owners",
        "dispatch.degraded": "fleet:{quota}:dispatch:degraded",
        "dispatch.queue('propagate')": "fleet-propagate",
        "api.tree_lock": "fleet:{quota}:api:tree-lock",
        "api.durability_marker": "fleet:{quota}:api:durability-marker",
        "api.console_session('d')": "fleet:{quota}:api:console-session:d",
        "res.member_base('m')": "fleet:{res:m}:",
        "res.member('m').held": "fleet:{res:m}:held",
        "res.member('m').items": "fleet:{res:m}:items",
        "res.member('m').expiry": "fleet:{res:m}:expiry",
        "res.member('m').version": "fleet:{res:m}:version",
        "res.member('m').takes('r')": "fleet:{res:m}:takes:r",
    }
