"""Runs and experiment configs in the provenance database (tables `result_runs` and
`result_experiments`, migration v3 in gpupolicy/provenance/schema.py). One ingest is one
transaction: a run is stored whole, with the experiment config that came with it, or not at all.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError

from gpupolicy.core.immutable import immutable
from gpupolicy.provenance.errors import StoreUnavailable
from gpupolicy.provenance.filters import RecordFilter
from gpupolicy.provenance.record import STATUS_NEVER_PERSISTED, ProvenanceRecord, format_time
from gpupolicy.provenance.schema import result_experiments, result_runs
from gpupolicy.provenance.store import ProvenanceStore
from gpupolicy.results.readers import RequestSample


class DuplicateRun(ValueError):
    """The experiment already has a run for this arm and repeat."""


@dataclass(slots=True)
class StoredRun:
    experiment: str
    arm: str
    repeat: int
    format: str
    files: list[str]
    duration_s: float
    gpus: float
    gpu_source: str
    samples: list[RequestSample]
    run_date: str | None = None
    price_per_gpu_hour: float | None = None
    node_pool: str | None = None
    record_uid: str | None = None
    template_hash: str | None = None
    provenance: dict[str, Any] | None = None
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    ingested_at: str = field(default_factory=lambda: format_time(datetime.now(UTC)))

    @property
    def label(self) -> str:
        """How a report names the run: `treatment#2 (files)`."""
        return f"{self.arm}#{self.repeat} ({', '.join(self.files)})"

    def row(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "experiment": self.experiment,
            "arm": self.arm,
            "repeat": self.repeat,
            "ingested_at": self.ingested_at,
            "format": self.format,
            "files": json.dumps(self.files),
            "run_date": self.run_date,
            "duration_s": self.duration_s,
            "gpus": self.gpus,
            "gpu_source": self.gpu_source,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "node_pool": self.node_pool,
            "record_uid": self.record_uid,
            "template_hash": self.template_hash,
            "provenance": json.dumps(self.provenance, sort_keys=True)
            if self.provenance is not None
            else None,
            "samples": json.dumps([sample.to_row() for sample in self.samples], separators=(",", ":")),
        }

    @classmethod
    def from_row(cls, row: Any) -> StoredRun:
        return cls(
            experiment=row.experiment,
            arm=row.arm,
            repeat=row.repeat,
            format=row.format,
            files=json.loads(row.files),
            duration_s=row.duration_s,
            gpus=row.gpus,
            gpu_source=row.gpu_source,
            samples=[RequestSample.from_row(item) for item in json.loads(row.samples)],
            run_date=row.run_date,
            price_per_gpu_hour=row.price_per_gpu_hour,
            node_pool=row.node_pool,
            record_uid=row.record_uid,
            template_hash=row.template_hash,
            provenance=json.loads(row.provenance) if row.provenance else None,
            run_id=row.run_id,
            ingested_at=row.ingested_at,
        )


@immutable
class StoredConfig:
    name: str
    source: str
    obj: Mapping[str, Any]


def _unavailable(exc: SQLAlchemyError) -> StoreUnavailable:
    return StoreUnavailable(
        f"provenance database unavailable: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    )


def save_run(
    store: ProvenanceStore, run: StoredRun, *, config: StoredConfig | None = None, replace: bool = False
) -> None:
    """Store the run (and the config) in one transaction; DuplicateRun when the arm's repeat is
    there already and `replace` is false."""
    try:
        store.ensure_schema()
        with store.engine.connect().execution_options(sqlite_immediate=True) as conn, conn.begin():
            key = (
                result_runs.c.experiment == run.experiment,
                result_runs.c.arm == run.arm,
                result_runs.c.repeat == run.repeat,
            )
            existing = conn.execute(select(result_runs.c.run_id).where(*key)).first()
            if existing is not None and not replace:
                raise DuplicateRun(
                    f"experiment {run.experiment} already has run {run.arm}#{run.repeat}; pass --replace to replace it"
                )
            if existing is not None:
                conn.execute(delete(result_runs).where(*key))
            conn.execute(result_runs.insert().values(**run.row()))
            if config is not None:
                conn.execute(delete(result_experiments).where(result_experiments.c.name == config.name))
                conn.execute(
                    result_experiments.insert().values(
                        name=config.name,
                        stored_at=run.ingested_at,
                        source=config.source,
                        config=json.dumps(config.obj, sort_keys=True, ensure_ascii=False),
                    )
                )
    except SQLAlchemyError as exc:
        raise _unavailable(exc) from exc


def load_runs(store: ProvenanceStore, experiment: str) -> list[StoredRun]:
    """The experiment's runs by arm, then repeat."""
    statement = (
        select(result_runs)
        .where(result_runs.c.experiment == experiment)
        .order_by(result_runs.c.arm, result_runs.c.repeat)
    )
    return [StoredRun.from_row(row) for row in _read(store, statement)]


def load_config(store: ProvenanceStore, name: str) -> StoredConfig | None:
    rows = _read(store, select(result_experiments).where(result_experiments.c.name == name))
    if not rows:
        return None
    return StoredConfig(rows[0].name, rows[0].source, json.loads(rows[0].config))


def _read(store: ProvenanceStore, statement: Any) -> list[Any]:
    try:
        store.ensure_schema()
        with store.engine.connect() as conn:
            return list(conn.execute(statement).all())
    except SQLAlchemyError as exc:
        raise _unavailable(exc) from exc


def admitted_config(store: ProvenanceStore, experiment: str) -> tuple[StoredConfig, str] | None:
    """The experiment ConfigMap of the latest provenance record of one of its arms that carries
    it (the webhook records it with each admitted arm), and that record's uid."""
    latest: ProvenanceRecord | None = None
    for record in store.iter_records(RecordFilter(experiment=experiment)):
        if record.experiment_config is not None and record.status != STATUS_NEVER_PERSISTED:
            latest = record
    if latest is None or latest.experiment_config is None:
        return None
    snapshot = latest.experiment_config
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": snapshot.get("name"), "namespace": snapshot.get("namespace")},
        "data": dict(snapshot.get("data") or {}),
    }
    return StoredConfig(experiment, f"provenance record {latest.uid}", obj), latest.time


def workload_record(store: ProvenanceStore, namespace: str, name: str) -> ProvenanceRecord | None:
    """The latest record of the workload a person or GitOps tool applied (not the ReplicaSets
    and Pods its controller made, not one that was never persisted)."""
    latest: ProvenanceRecord | None = None
    for record in store.iter_records(RecordFilter(namespace=namespace, name=name)):
        if record.status != STATUS_NEVER_PERSISTED and record.controller is None:
            latest = record
    return latest
