"""Server: listeners started and stopped inside one running loop, as the simulator does."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from fleet.apiserver import NODE, MemoryStore, Server, build_app
from fleet.sim import member_registry
from tests.support.net import free_port

pytestmark = pytest.mark.integration


def test_stop_refuses_connections_and_start_serves_the_same_store_again() -> None:
    async def scenario() -> None:
        store = MemoryStore.with_default_namespaces()
        port = free_port()
        server = Server(build_app(member_registry(), store), "127.0.0.1", port, grace=1)
        await server.start()
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
            created = await http.post("/api/v1/nodes", json={"metadata": {"name": "n1"}})
            assert created.status_code == 201
        await server.stop()
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get("/readyz")
        await store.create(NODE, {"metadata": {"name": "n2"}})  # the store lives on while down
        await server.start()
        assert server.port == port
        async with httpx.AsyncClient(base_url=server.url, timeout=5) as http:
            names = [n["metadata"]["name"] for n in (await http.get("/api/v1/nodes")).json()["items"]]
            assert names == ["n1", "n2"]
        await server.stop()

    asyncio.run(scenario())


def test_several_listeners_in_one_loop_and_stopping_one_ends_its_watches() -> None:
    async def scenario() -> None:
        servers = [
            Server(
                build_app(member_registry(), MemoryStore.with_default_namespaces()), "127.0.0.1", 0, grace=1
            )
            for _ in range(3)
        ]
        for server in servers:
            await server.start()
        assert len({s.port for s in servers}) == 3

        async def watch(url: str) -> list[dict[str, Any]]:
            async with httpx.AsyncClient(timeout=10) as http:
                params = {"watch": "1", "resourceVersion": "0"}
                async with http.stream("GET", f"{url}/api/v1/namespaces", params=params) as response:
                    return [json.loads(line) async for line in response.aiter_lines() if line]

        watching = asyncio.create_task(watch(servers[0].url))
        await asyncio.sleep(0.3)
        started = asyncio.get_running_loop().time()
        await servers[0].stop()
        events = await asyncio.wait_for(watching, 5)
        assert asyncio.get_running_loop().time() - started < 3
        assert [e["type"] for e in events] == ["ADDED"] * 3  # the stream ended cleanly
        async with httpx.AsyncClient(timeout=5) as http:
            for server in servers[1:]:
                assert (await http.get(f"{server.url}/readyz")).text == "ok"
        for server in servers[1:]:
            await server.stop()

    asyncio.run(scenario())


def test_a_port_in_use_is_an_oserror_and_the_loop_lives_on() -> None:
    async def scenario() -> None:
        first = Server(build_app(member_registry(), MemoryStore.with_default_namespaces()), "127.0.0.1", 0)
        await first.start()
        clash = Server(
            build_app(member_registry(), MemoryStore.with_default_namespaces()), "127.0.0.1", first.port
        )
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            await clash.start()
        assert not clash.running
        async with httpx.AsyncClient(base_url=first.url) as http:
            assert (await http.get("/livez")).text == "ok"
        await first.stop()
        await clash.start()  # the port is free again
        await clash.stop()

    asyncio.run(scenario())
