"""Fixtures: a serving-core API server per test on a loopback port, and clients for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from tests.support.apiserver import ApiServerThread


@pytest.fixture
def apiserver() -> Iterator[ApiServerThread]:
    server = ApiServerThread().start()
    yield server
    server.close()


@pytest.fixture
def api(apiserver: ApiServerThread) -> Iterator[client.ApiClient]:
    api_client = apiserver.api_client()
    yield api_client
    api_client.close()  # type: ignore[no-untyped-call]


@pytest.fixture
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
