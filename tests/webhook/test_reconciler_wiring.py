"""The server starts the provenance reconciler only when it has both a store and a cluster client,
and a cluster it cannot discover never stops it from serving."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from gpupolicy.webhook.server import open_provenance, start_reconciler


class _Inventory:
    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client


def test_no_reconciler_without_a_cluster_client(tmp_path: Path) -> None:
    provenance = open_provenance(None, tmp_path / "data")
    try:
        assert start_reconciler(provenance, _Inventory(None)) is None  # type: ignore[arg-type]
        assert start_reconciler(None, _Inventory(object())) is None  # type: ignore[arg-type]
    finally:
        provenance.store.close()


def test_an_unreachable_api_server_leaves_records_admitted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = "http://127.0.0.1:9"  # discard port: nothing answers
    configuration.retries = 0
    provenance = open_provenance(None, tmp_path / "data")
    try:
        with caplog.at_level("WARNING"):
            stop = start_reconciler(provenance, _Inventory(client.ApiClient(configuration)))  # type: ignore[arg-type]
        assert stop is None
        assert "provenance reconciler not started" in caplog.text
    finally:
        provenance.store.close()


def test_a_reachable_cluster_starts_the_reconciler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []

    def fake_lookup(api_client: Any) -> Any:
        calls.append(("lookup", api_client))
        return lambda kind, namespace, name: None

    monkeypatch.setattr("gpupolicy.provenance.reconciler.kubernetes_lookup", fake_lookup)
    provenance = open_provenance(None, tmp_path / "data")
    api_client = object()
    try:
        stop = start_reconciler(provenance, _Inventory(api_client))  # type: ignore[arg-type]
        assert isinstance(stop, threading.Event)
        assert calls == [("lookup", api_client)]
        stop.set()
    finally:
        provenance.store.close()
