"""One fleet API replica: the serving core over the fleet's kinds and backends, with auth.

:func:`build_fleet_api` assembles ``build_app(fleet_registry(), FleetStore(...), ...)``:

* AscendJob -> :class:`~fleet.endpoint.job_backend.JobBackend` (submission through the ledger);
* ElasticQuotaTree -> :class:`~fleet.endpoint.quota_tree.TreeBackend` (checked, applied to the ledger);
* PriorityClass -> :class:`~fleet.endpoint.priority_classes.PriorityClassBackend` (defaulted; checked
  against the stored class and the other defaults);
* Queue, MemberCluster and Namespace -> computed views (:mod:`~fleet.endpoint.quota_queues`,
  :mod:`~fleet.endpoint.members`, :mod:`~fleet.endpoint.namespaces`);
* Event and PropagationPolicy -> the plain object store (:class:`fleet.state.AsyncObjects`);
* every job kind's ``explain`` subresource -> :class:`~fleet.endpoint.explain.Explainer` (would the
  fleet accept, admit and place this job now, from the records in Redis).

The fleet console (:mod:`fleet.endpoint.console`) is served by the same app at ``/console/``,
with the same authenticator and authorizer.

With ``tokens`` the replica authenticates bearer tokens and authorizes with the roles of
:mod:`fleet.endpoint.auth` (``/metrics`` too: admins and metrics readers); without, every
request is served (local use). The app's Prometheus registry (``/metrics``) gets the queue and
quota gauges of :mod:`fleet.endpoint.metrics`, and
:class:`~fleet.endpoint.warning_headers.WarningHeaders` turns backend warnings into ``Warning`` headers.

A replica keeps no state of its own beyond caches, so any number of them may serve one Redis:
the object store's writes are atomic scripts with optimistic concurrency, its watches read the
kinds' change streams, the ledger's changes are scripts too, and tree applies take a lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass

import redis
import redis.asyncio
from starlette.applications import Starlette

from fleet.apiserver import FRESH_WAIT_SECONDS, Access, Obj, anonymous_info, build_app, no_path_grants
from fleet.endpoint.auth import FleetAuthorizer, Identity, TokenAuthenticator, TokenFile
from fleet.endpoint.backends import FleetStore
from fleet.endpoint.console import Console, Sessions, mount_console
from fleet.endpoint.errors import redis_unavailable
from fleet.endpoint.explain import Explainer
from fleet.endpoint.job_backend import JobBackend
from fleet.endpoint.keys import ApiKeys
from fleet.endpoint.members import MemberNames, member_kind
from fleet.endpoint.metrics import QuotaCollector
from fleet.endpoint.namespaces import namespace_kind
from fleet.endpoint.priority_classes import PriorityClassBackend
from fleet.endpoint.quota_queues import queue_kind
from fleet.endpoint.quota_tree import TreeBackend
from fleet.endpoint.registry import fleet_registry
from fleet.endpoint.warning_headers import WarningHeaders
from fleet.jobs import Durability
from fleet.kinds import (
    ELASTIC_QUOTA_TREE,
    EXPLAIN,
    FLEET_JOB_KINDS,
    FLEET_NAMESPACE,
    MEMBER_CLUSTER,
    PRIORITY_CLASS,
    QUEUE,
)
from fleet.state import (
    AsyncObjects,
    DispatchKeys,
    Objects,
    StateKeys,
)
from queues import DEFAULT_SPACE, Keys, KeySpace, Ledger

__all__ = ["FleetApi", "build_fleet_api"]


@dataclass
class FleetApi:
    """An assembled replica: serve ``app``; ``close()`` when done (it does not close the clients)."""

    app: Starlette
    store: FleetStore
    objects: AsyncObjects
    ledger: Ledger
    explainer: Explainer
    console: Console

    async def close(self) -> None:
        """Stop the console's job index and the object store's stream readers."""
        await self.console.close()
        await self.objects.close()


def build_fleet_api(
    client: redis.Redis,
    aclient: redis.asyncio.Redis,
    *,
    members: MemberNames = list,
    tokens: Mapping[str, Identity] | TokenFile | None = None,
    poll_interval: float = 1.0,
    bookmark_interval: float = 30.0,
    history: int = 10_000,
    block_ms: int = 1000,
    space: KeySpace = DEFAULT_SPACE,
    durability: Durability | None = None,
    fresh_wait: float = FRESH_WAIT_SECONDS,
) -> FleetApi:
    """A replica over one Redis, reached by ``client`` (sync: the ledger, in worker threads) and
    ``aclient`` (asyncio: the object store, on the loop). Call it on the loop that serves.

    ``members`` lists the member names (see :func:`fleet.endpoint.members.members_from`);
    ``poll_interval`` paces watches of the computed kinds; ``durability`` is what a submission
    waits for before it is acknowledged (:mod:`fleet.jobs.durability`); ``space`` is the
    deployment's key space (``--key-prefix``), every key set the replica uses derives from it;
    ``fresh_wait`` is how long a list or watch from a version not reached waits for it (then
    ``Too large resource version``).
    """
    quota_keys, state_keys = Keys.within(space), StateKeys.within(space)
    dispatch_keys, api_keys = DispatchKeys.within(space), ApiKeys.within(space)
    objects_store = AsyncObjects(
        aclient, state_keys, history=history, block_ms=block_ms, fresh_wait=fresh_wait
    )
    ledger = Ledger(client, quota_keys)
    objects = Objects(client, state_keys, history=history)
    registry = fleet_registry(objects.try_get)
    version = objects_store.resource_version
    jobs = JobBackend(objects_store, ledger, objects, durability=durability, keys=api_keys)
    store = FleetStore(
        objects_store,
        {
            **{rt.key: jobs for rt in FLEET_JOB_KINDS},
            ELASTIC_QUOTA_TREE.key: TreeBackend(objects_store, ledger, aclient, keys=api_keys),
            PRIORITY_CLASS.key: PriorityClassBackend(objects_store),
            QUEUE.key: queue_kind(ledger, version, interval=poll_interval, fresh_wait=fresh_wait),
            MEMBER_CLUSTER.key: member_kind(
                members, aclient, version, keys=dispatch_keys, interval=poll_interval, fresh_wait=fresh_wait
            ),
            FLEET_NAMESPACE.key: namespace_kind(
                ledger,
                aclient,
                registry,
                version,
                keys=state_keys,
                interval=poll_interval,
                fresh_wait=fresh_wait,
            ),
        },
    )
    explainer = Explainer(ledger, objects, client, dispatch_keys, members)

    async def explain(access: Access, body: Obj | None) -> Obj:
        """The ``explain`` subresource (:mod:`fleet.endpoint.explain`): a job sent, or the stored one."""
        with redis_unavailable():
            if body is not None:
                prepared = await asyncio.to_thread(jobs.admission, access.resource, body)
                return await asyncio.to_thread(explainer.explain_new, prepared)
            assert access.name is not None
            obj = await objects_store.get(access.resource, access.namespace, access.name)
            return await asyncio.to_thread(explainer.explain_stored, obj)

    authenticator = authorizer = None
    user_info = anonymous_info
    visibility = None
    paths = no_path_grants
    if tokens is not None:
        authenticator = TokenAuthenticator(tokens)
        authorizer = FleetAuthorizer(tokens if isinstance(tokens, TokenFile) else tokens.values())
        user_info, visibility, paths = authorizer.user_info, authorizer.visible, authorizer.allows_path
    app = build_app(
        registry,
        store,
        authenticator=authenticator,
        authorizer=authorizer,
        user_info=user_info,
        visibility=visibility,
        bookmark_interval=bookmark_interval,
        title="fleet",
        subresources={EXPLAIN.name: explain},
        paths=paths,
        fresh_wait=fresh_wait,
    )
    console = Console(
        store=store,
        objects_store=objects_store,
        objects=objects,
        ledger=ledger,
        explainer=explainer,
        sessions=Sessions(aclient, api_keys, authenticator, authorizer),
        aclient=aclient,
        dispatch_keys=dispatch_keys,
    )
    mount_console(app, console)
    app.add_middleware(WarningHeaders)
    app.state.metrics_registry.register(QuotaCollector(ledger))
    return FleetApi(app, store, objects_store, ledger, explainer, console)
