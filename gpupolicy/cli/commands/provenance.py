"""`gpupolicy provenance list|show|export`: query the webhook's provenance store.

    gpupolicy provenance list   [--db URL] [filters] [--limit N] [--cursor C] [--format table|json|jsonl|csv]
    gpupolicy provenance show   UID [--db URL] [--format table|json|jsonl|csv]
    gpupolicy provenance export [--db URL] [filters] [--format jsonl|json|csv|table] [--output FILE]

Filters: --experiment, --namespace, --kind, --name, --since, --until (ISO 8601 or 90m/24h/7d),
--status. Exit codes: 0 done; 1 `show` found no such record; 2 usage errors and an unreachable
database.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gpupolicy.core.exit_codes import EXIT_CLEAN, EXIT_FINDINGS, UsageError
from gpupolicy.provenance.filters import FilterError, RecordFilter
from gpupolicy.provenance.locations import DB_ENV, default_db_url, sqlite_path
from gpupolicy.provenance.record import STATUSES
from gpupolicy.provenance.rendering import FORMATS, render, render_detail

EXIT_NOT_FOUND = EXIT_FINDINGS


def add_db_arguments(parser: argparse.ArgumentParser) -> None:
    """--db and --schema, read by `open_store_from_args` (also used by `gpupolicy results`)."""
    parser.add_argument(
        "--db",
        metavar="URL",
        help=f"sqlite:///path.db or postgresql://… (default: ${DB_ENV}, else /var/lib/gpupolicy/provenance.db)",
    )
    parser.add_argument("--schema", help="PostgreSQL schema holding the tables (default: search_path)")


def _common(parser: argparse.ArgumentParser, *, default_format: str) -> None:
    add_db_arguments(parser)
    parser.add_argument("--format", "-f", choices=FORMATS, default=default_format)


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--experiment", help="label gpupolicy.io/experiment")
    parser.add_argument("--namespace", "-n")
    parser.add_argument("--kind")
    parser.add_argument("--name")
    parser.add_argument("--since", help="records at or after: ISO 8601 time or date, or 90m, 24h, 7d")
    parser.add_argument("--until", help="records before: same forms as --since")
    parser.add_argument("--status", choices=STATUSES)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    provenance = commands.add_parser("provenance", help="query the webhook's benchmark-provenance records")
    actions = provenance.add_subparsers(dest="provenance_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="list records, oldest first, one page at a time")
    _common(listing, default_format="table")
    _filters(listing)
    listing.add_argument("--limit", type=int, default=100, help="records per page (1-1000; default 100)")
    listing.add_argument("--cursor", help="continue after the page that printed this cursor")
    show = actions.add_parser("show", help="show one record by its admission request uid")
    show.add_argument("uid")
    _common(show, default_format="table")
    export = actions.add_parser("export", help="write every matching record (JSONL by default)")
    _common(export, default_format="jsonl")
    _filters(export)
    export.add_argument("--output", "-o", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    for parser in (listing, show, export):
        parser.set_defaults(handler=run)


def open_store_from_args(args: argparse.Namespace, *, create: bool = False) -> Any:
    """The store named by --db/--schema (or $GPUPOLICY_PROVENANCE_DB). A SQLite file must exist
    unless `create` (a writer such as `results ingest` may start a new database)."""
    url = args.db or default_db_url()
    path = sqlite_path(url)
    if path is not None and not path.is_file() and not (create and path.parent.is_dir()):
        raise UsageError(f"no provenance database at {path} (pass --db or set ${DB_ENV})")
    try:
        from gpupolicy.provenance.store import open_reader
    except ImportError as exc:  # SQLAlchemy is a webhook extra
        raise UsageError(f"the provenance store needs gpupolicy[webhook] ({exc})") from exc
    try:
        return open_reader(url, schema=args.schema)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _record_filter(args: argparse.Namespace) -> RecordFilter:
    try:
        return RecordFilter.parse(
            experiment=args.experiment,
            namespace=args.namespace,
            kind=args.kind,
            name=args.name,
            since=args.since,
            until=args.until,
            status=args.status,
        )
    except FilterError as exc:
        raise UsageError(str(exc)) from exc


def _write(chunks: Iterable[str], output: Path | None) -> None:
    if output is None:
        for chunk in chunks:
            sys.stdout.write(chunk)
        return
    partial = output.with_name(output.name + ".partial")
    with partial.open("w", encoding="utf-8", newline="") as handle:
        for chunk in chunks:
            handle.write(chunk)
    partial.replace(output)  # a failed export never leaves a truncated file under the real name


def run(args: argparse.Namespace) -> int:
    from gpupolicy.provenance.filters import FilterError as CursorError

    flt = _record_filter(args) if args.provenance_action != "show" else None
    store = open_store_from_args(args)
    try:
        from gpupolicy.provenance.errors import StoreUnavailable

        try:
            if args.provenance_action == "show":
                found = store.get(args.uid)
                if found is None:
                    print(f"gpupolicy: no provenance record {args.uid!r}", file=sys.stderr)
                    return EXIT_NOT_FOUND
                if args.format == "table":
                    _write([render_detail(found)], None)
                elif args.format == "json":  # one record: the object itself, not a list of one
                    _write(
                        [json.dumps(found.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"],
                        None,
                    )
                else:
                    _write(render([found], args.format), None)
            elif args.provenance_action == "list":
                if not 1 <= args.limit <= 1000:
                    raise UsageError("--limit must be between 1 and 1000")
                try:
                    page = store.query(flt, limit=args.limit, cursor=args.cursor)
                except CursorError as exc:
                    raise UsageError(str(exc)) from exc
                _write(render(page.items, args.format), None)
                if page.next_cursor is not None:
                    print(f"more records: --cursor {page.next_cursor}", file=sys.stderr)
            else:
                _write(render(store.iter_records(flt), args.format), args.output)
        except StoreUnavailable as exc:
            raise UsageError(str(exc)) from exc
    finally:
        store.close()
    return EXIT_CLEAN
