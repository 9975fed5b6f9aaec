"""The provenance tests' stores (SQLite in tmp_path, a fresh PostgreSQL schema) and records."""

from tests.provenance.conftest import backend, gpu_policy, make_record

__all__ = ["backend", "gpu_policy", "make_record"]
