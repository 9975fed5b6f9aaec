"""`gpupolicy serve`: the validating admission webhook.

TLS always (`--tls-cert`/`--tls-key`, reloaded when the files change; so are the `--policy`
files, and an invalid new policy is refused while the last good one serves); plain HTTP only with
`--insecure-dev`, for a laptop. Without a reachable Kubernetes API the server still serves: the
cluster inventory is reported unavailable in /readyz and in the findings that need it.
Webhook-only dependencies (FastAPI, uvicorn, kubernetes, prometheus-client, SQLAlchemy) are
imported in `run()` only: the linter never loads them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

from gpupolicy.cli.options import add_policy_option
from gpupolicy.core.vocabulary import MODES
from gpupolicy.provenance.locations import DB_ENV

SERVE_EXIT_CODES = (
    "exit codes: 0 stopped by SIGTERM or SIGINT after draining in-flight reviews and the provenance "
    "queue; 2 configuration errors (bad arguments, an unusable policy or TLS file, a port that cannot "
    "be bound); 3 an internal error (please report it). Admission decisions are HTTP responses, "
    "never exit codes."
)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="run the validating admission webhook (extra: [webhook])",
        epilog=SERVE_EXIT_CODES,
    )
    _add_listening_arguments(serve)
    _add_policy_arguments(serve)
    _add_tls_arguments(serve)
    _add_store_arguments(serve)
    _add_connections_arguments(serve)
    _add_provenance_api_arguments(serve)
    _add_cluster_arguments(serve)
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    # Measured slower (CPU-bound reviews contend for the GIL): kept for the benchmark.
    serve.add_argument("--review-in-threadpool", action="store_true", help=argparse.SUPPRESS)
    serve.set_defaults(handler=run)


def _add_listening_arguments(serve: argparse.ArgumentParser) -> None:
    """Where the admission server listens."""
    serve.add_argument("--host", default="0.0.0.0", help="address to listen on (default 0.0.0.0)")
    serve.add_argument("--port", type=int, default=8443, help="port to listen on (default 8443)")


def _add_policy_arguments(serve: argparse.ArgumentParser) -> None:
    """The policy files and the mode."""
    add_policy_option(serve, "a policy file merged over the default (repeatable)")
    serve.add_argument(
        "--policy-check-seconds",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often to look for changed --policy files (a ConfigMap update): a valid new policy "
        "replaces the one in use, an invalid one is refused and the last good one stays (default 10)",
    )
    serve.add_argument("--mode", choices=MODES, help="default mode (overrides the policy's webhook.mode)")


def _add_tls_arguments(serve: argparse.ArgumentParser) -> None:
    """The TLS files, reloaded when they change."""
    serve.add_argument("--tls-cert", type=Path, metavar="FILE", help="certificate chain (PEM)")
    serve.add_argument("--tls-key", type=Path, metavar="FILE", help="private key (PEM)")
    serve.add_argument(
        "--tls-check-seconds", type=float, default=10.0, help="how often to look for rotated TLS files"
    )
    serve.add_argument(
        "--insecure-dev",
        action="store_true",
        help="serve plain HTTP (development only; the API server needs TLS)",
    )


def _add_store_arguments(serve: argparse.ArgumentParser) -> None:
    """Where provenance is stored."""
    database = serve.add_mutually_exclusive_group()
    database.add_argument(
        "--db",
        metavar="URL",
        help=f"provenance database URL (default: ${DB_ENV}, else SQLite in --data-dir). Process "
        "arguments are visible to anyone on the host: give a URL with a password as "
        f"--db-url-file or ${DB_ENV}",
    )
    database.add_argument(
        "--db-url-file",
        type=Path,
        metavar="FILE",
        help="read the provenance database URL from FILE (a mounted Secret)",
    )
    serve.add_argument(
        "--data-dir",
        type=Path,
        default=Path("/var/lib/gpupolicy"),
        help="where the SQLite store and the durable spool live (default /var/lib/gpupolicy)",
    )
    serve.add_argument(
        "--db-timeout",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="longest wait for the provenance database before a record goes to the durable spool "
        "instead (default 2; keep it below the webhook's timeoutSeconds)",
    )
    serve.add_argument(
        "--provenance-writes",
        choices=("journal", "direct"),
        default="journal",
        help="journal (default): an admission is answered once its body and decision are in the "
        "local journal, and a process of its own makes and stores the records; direct: the "
        "request builds its record and waits for the store",
    )
    serve.add_argument(
        "--journal-max-mb",
        type=int,
        default=256,
        metavar="MB",
        help="most the journal may hold on disk (default 256); past it admissions are answered "
        "unrecorded (and counted) until the replayer catches up. Keep it inside the data "
        "directory's volume",
    )


def _add_connections_arguments(serve: argparse.ArgumentParser) -> None:
    """What a client may take of the server: time to send, time to drain."""
    serve.add_argument(
        "--read-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="longest time a client may take to send a request's headers and body; the connection "
        "is closed past it (default 10: the API server sends at once, a slowloris trickles)",
    )
    serve.add_argument(
        "--drain-seconds",
        type=int,
        default=5,
        metavar="SECONDS",
        help="after SIGTERM, how long requests in flight may take to finish (new connections are "
        "refused at once); the process exits at most 5 s after that, even if the event loop is "
        "still busy (default 5; keep the sum below terminationGracePeriodSeconds)",
    )


def _add_provenance_api_arguments(serve: argparse.ArgumentParser) -> None:
    """Whether provenance is recorded, and where it may be read."""
    serve.add_argument("--no-provenance", action="store_true", help="do not record provenance")
    serve.add_argument(
        "--provenance-api-port",
        type=int,
        metavar="PORT",
        help="serve GET /provenance on this port (default: not served). Never on the admission "
        "port: every record is readable there, without authentication",
    )
    serve.add_argument(
        "--provenance-api-host",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address of --provenance-api-port (default 127.0.0.1: inside the pod, or through "
        "kubectl port-forward)",
    )


def _add_cluster_arguments(serve: argparse.ArgumentParser) -> None:
    """The cluster the inventory and the cluster facts are read from."""
    serve.add_argument(
        "--kubeconfig", metavar="FILE", help="kubeconfig outside a cluster (default: in-cluster)"
    )
    serve.add_argument(
        "--no-cluster", action="store_true", help="do not read the cluster (inventory unavailable)"
    )
    serve.add_argument(
        "--no-cluster-facts",
        action="store_true",
        help="do not learn node pools, GPU taints and node labels from the cluster's Nodes (the "
        "policy files alone describe the cluster; see docs/cluster.md)",
    )
    serve.add_argument(
        "--cluster-facts-seconds",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="least time between two recomputations of the cluster facts after Nodes, DeviceClasses "
        "or ResourceQuotas change (default 10)",
    )


def run(args: argparse.Namespace) -> int:
    from gpupolicy.core.exit_codes import EXIT_CLEAN, UsageError

    if (args.tls_cert is None) != (args.tls_key is None):
        raise UsageError("give both --tls-cert and --tls-key")
    if args.tls_cert is None and not args.insecure_dev:
        raise UsageError(
            "the webhook serves TLS only: give --tls-cert and --tls-key (or --insecure-dev on a laptop)"
        )
    if not args.db_timeout > 0:
        raise UsageError(f"--db-timeout must be a positive number of seconds, got {args.db_timeout}")
    if args.provenance_api_port is not None and args.no_provenance:
        raise UsageError("--provenance-api-port serves the provenance records: not with --no-provenance")
    if args.provenance_api_port is not None and args.provenance_api_port == args.port:
        raise UsageError("--provenance-api-port must not be the admission port (--port)")
    if not args.policy_check_seconds > 0:
        raise UsageError(
            f"--policy-check-seconds must be a positive number of seconds, got {args.policy_check_seconds}"
        )
    if not args.cluster_facts_seconds >= 0:
        raise UsageError(
            f"--cluster-facts-seconds must be zero or a positive number of seconds, got {args.cluster_facts_seconds}"
        )
    if not args.drain_seconds > 0:
        raise UsageError(f"--drain-seconds must be a positive number of seconds, got {args.drain_seconds}")
    if not args.read_timeout > 0:
        raise UsageError(f"--read-timeout must be a positive number of seconds, got {args.read_timeout}")
    for path in (args.tls_cert, args.tls_key, *args.policy):
        if path is not None and not path.is_file():
            raise UsageError(f"{path}: no such file")
    args.db = database_url(args)
    try:
        import uvicorn

        from gpupolicy.webhook.logs import flush_logs
        from gpupolicy.webhook.server import UnusableSettings, build_server
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise UsageError(
            f"gpupolicy serve needs the [webhook] extra: pip install 'gpupolicy[webhook]' ({exc})"
        ) from exc

    server: uvicorn.Server
    try:
        server, cleanup = build_server(args)
    except UnusableSettings as exc:
        raise UsageError(str(exc)) from exc
    try:
        server.run()
    except SystemExit as exc:  # uvicorn exits 1 when it cannot start (port taken, TLS files unusable)
        if exc.code in (0, None):
            raise
        raise UsageError("could not start the server (uvicorn logged why above)") from exc
    finally:
        cleanup()
        flush_logs()  # what the loop's last turn held: the CLI ends the process without logging's own
    return EXIT_CLEAN


def database_url(args: argparse.Namespace) -> str | None:
    """The provenance database URL: `--db`, `--db-url-file`, else `$GPUPOLICY_PROVENANCE_DB`,
    else None (SQLite in --data-dir)."""
    from gpupolicy.core.exit_codes import UsageError

    if args.db_url_file is not None:
        try:
            url: str = args.db_url_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--db-url-file {args.db_url_file}: {exc}") from exc
        if not url or "\n" in url:
            raise UsageError(f"--db-url-file {args.db_url_file}: expected one line holding the database URL")
        return url
    if args.db:
        if _has_password(args.db):
            print(
                f"gpupolicy serve: warning: the --db URL holds a password, which anyone who can list "
                f"processes sees: use --db-url-file or ${DB_ENV}",
                file=sys.stderr,
            )
        return str(args.db)
    return os.environ.get(DB_ENV) or None


def _has_password(url: str) -> bool:
    try:
        return bool(urlsplit(url).password)
    except ValueError:  # not a URL at all: the store says so
        return False
