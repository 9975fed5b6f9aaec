"""GET /provenance through FastAPI's TestClient, on a store with records."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from gpupolicy.provenance import router
from tests.provenance.samples import Backend, MakeRecord


@pytest.fixture
def client(backend: Backend, make_record: MakeRecord) -> Iterator[TestClient]:
    with backend.open() as store:
        for index in range(7):
            store.record(
                make_record(
                    f"uid-{index}",
                    minutes=index,
                    namespace="ai-lab" if index < 4 else "batch",
                    labels={"gpupolicy.io/experiment": "exp-a" if index % 2 == 0 else "exp-b"},
                )
            )
        app = FastAPI()
        app.include_router(router(store))
        with TestClient(app) as test_client:
            yield test_client


def uids(body: dict[str, Any]) -> list[str]:
    return [item["uid"] for item in body["items"]]


def test_list_with_filters(client: TestClient) -> None:
    response = client.get("/provenance")
    assert response.status_code == 200
    body = response.json()
    assert uids(body) == [f"uid-{index}" for index in range(7)]
    assert body["count"] == 7 and body["next_cursor"] is None
    assert body["items"][0]["images"][0]["digest"].startswith("sha256:")
    assert uids(client.get("/provenance", params={"experiment": "exp-a"}).json()) == [
        "uid-0",
        "uid-2",
        "uid-4",
        "uid-6",
    ]
    assert uids(client.get("/provenance", params={"experiment": "exp-a", "namespace": "batch"}).json()) == [
        "uid-4",
        "uid-6",
    ]
    assert uids(
        client.get(
            "/provenance", params={"kind": "Deployment", "name": "vllm-llama", "status": "admitted"}
        ).json()
    ) == [f"uid-{index}" for index in range(7)]
    window = {"since": "2026-11-30T02:02:00Z", "until": "2026-11-30T02:04:00Z"}
    assert uids(client.get("/provenance", params=window).json()) == ["uid-2", "uid-3"]


def test_pagination_with_cursor(client: TestClient) -> None:
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 3}
    while True:
        body = client.get("/provenance", params=params).json()
        seen += uids(body)
        if body["next_cursor"] is None:
            break
        params["cursor"] = body["next_cursor"]
    assert seen == [f"uid-{index}" for index in range(7)]


def test_bad_requests(client: TestClient) -> None:
    response = client.get("/provenance", params={"since": "last tuesday"})
    assert response.status_code == 400 and "cannot read time" in response.json()["detail"]
    assert client.get("/provenance", params={"status": "done"}).status_code == 400
    assert client.get("/provenance", params={"cursor": "%%%"}).status_code == 400
    assert client.get("/provenance", params={"limit": 0}).status_code == 422
    assert client.get("/provenance", params={"limit": 5000}).status_code == 422


def test_show_one(client: TestClient) -> None:
    response = client.get("/provenance/uid-3")
    assert response.status_code == 200 and response.json()["uid"] == "uid-3"
    assert client.get("/provenance/nope").status_code == 404
