"""`gpupolicy results ingest|report`: benchmark results of an experiment's arms, SLO-bounded
goodput per GPU-hour, and a verdict per treatment (docs/results.md).

    gpupolicy results ingest FILE... --experiment NAME --arm ARM --repeat K
                                     (--workload NAMESPACE/NAME | --gpus N) [--config FILE]
                                     [--input-format F] [--node-pool P | --price-per-gpu-hour X]
                                     [--policy FILE] [--replace] [--db URL] [--schema S]
    gpupolicy results report EXPERIMENT [--format table|json|markdown|html] [--output FILE]
                                     [--slo OBJECTIVES] [--config FILE] [--seed N]
                                     [--fail-on regressed|trade-off|inconclusive|never] [--db URL]

Exit codes: 0 done; 1 `report` found a treatment whose verdict is at or beyond --fail-on
(default: regressed); 2 usage, configuration and unreadable input files (one line naming the
file and the line or JSON path; nothing is stored); 3 an internal error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from gpupolicy.cli.commands.experiment import _experiment_config, _load
from gpupolicy.cli.commands.provenance import add_db_arguments, open_store_from_args
from gpupolicy.core.exit_codes import EXIT_CLEAN, EXIT_FINDINGS, UsageError
from gpupolicy.kube.experiments import ExperimentConfig, parse_experiment
from gpupolicy.kube.quantities import quantity_or_none
from gpupolicy.loading.documents import Resource
from gpupolicy.results.readers import FORMATS as INPUT_FORMATS
from gpupolicy.results.report import FORMATS as REPORT_FORMATS

FAIL_ON = {
    "regressed": frozenset({"regressed"}),
    "trade-off": frozenset({"regressed", "trade-off"}),
    "inconclusive": frozenset({"regressed", "trade-off", "inconclusive"}),
    "never": frozenset(),
}


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be a positive number")
    return value


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} must be zero or a positive number")
    return value


def _repeat(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a repeat number (1, 2, 3 ...)")
    return int(text)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    results = commands.add_parser("results", help="experiment results: goodput per GPU-hour and a verdict")
    actions = results.add_subparsers(dest="results_action", metavar="ACTION", required=True)
    ingest = actions.add_parser("ingest", help="store one run of an arm (one transaction)")
    ingest.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="the run's results (several: one run)"
    )
    ingest.add_argument("--experiment", required=True, help="the experiment (its ConfigMap's name)")
    ingest.add_argument("--arm", required=True, help="control or a treatment arm")
    ingest.add_argument("--repeat", required=True, type=_repeat, help="which repeat of the arm (1, 2, 3 ...)")
    gpus = ingest.add_mutually_exclusive_group(required=True)
    gpus.add_argument("--workload", metavar="NAMESPACE/NAME", help="GPUs from its provenance record")
    gpus.add_argument("--gpus", type=_positive, metavar="N", help="GPUs the run used (no provenance join)")
    ingest.add_argument("--input-format", choices=INPUT_FORMATS, default="auto")
    ingest.add_argument(
        "--config", type=Path, metavar="FILE", help="the experiment ConfigMap (stored with the run)"
    )
    price = ingest.add_mutually_exclusive_group()
    price.add_argument(
        "--node-pool", metavar="NAME", help="the policy's node pool whose pricePerGpuHour applies"
    )
    price.add_argument("--price-per-gpu-hour", type=_price, metavar="PRICE")
    ingest.add_argument("--policy", "-p", action="append", default=[], type=Path, metavar="FILE")
    ingest.add_argument("--replace", action="store_true", help="replace the arm's run of this repeat")
    add_db_arguments(ingest)
    report = actions.add_parser("report", help="metrics per arm and a verdict per treatment")
    report.add_argument("experiment")
    report.add_argument("--format", "-f", choices=REPORT_FORMATS, default="table")
    report.add_argument("--output", "-o", type=Path, metavar="FILE")
    report.add_argument(
        "--slo", help="objectives instead of the ConfigMap's slo: ttft_ms<=500,tpot_ms<=50,e2e_ms<=8000"
    )
    report.add_argument(
        "--config", type=Path, metavar="FILE", help="the experiment ConfigMap (else the stored one)"
    )
    report.add_argument(
        "--price-per-gpu-hour", type=_price, metavar="PRICE", help="instead of each run's price"
    )
    report.add_argument(
        "--seed", type=int, default=None, help="bootstrap seed (default: fixed, reports repeat)"
    )
    report.add_argument("--fail-on", choices=list(FAIL_ON), default="regressed", help="verdicts that exit 1")
    add_db_arguments(report)
    for parser in (ingest, report):
        parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from gpupolicy.provenance.errors import StoreUnavailable

    try:
        if args.results_action == "ingest":
            return _ingest(args)
        return _report(args)
    except StoreUnavailable as exc:
        raise UsageError(str(exc)) from exc


# -- the experiment config ----------------------------------------------------------------------


def _config_from_file(path: Path, name: str) -> ExperimentConfig:
    """The experiment ConfigMap `name` from FILE; its first schema error (not a warning such as
    an unknown metric word) is a usage error on the key's line."""
    config = _experiment_config(name, _load(str(path)))
    if config is None:
        raise UsageError(f"{path}: no experiment ConfigMap named {name}")
    for problem in config.problems:
        if problem.severity == "error":
            position = config.resource.position(problem.path)
            raise UsageError(f"{path}:{position[0] if position else 1}: {problem.message}")
    return config


def _config_from_store(store: Any, name: str) -> tuple[ExperimentConfig, str] | None:
    """The ConfigMap as admitted with the experiment's arms (provenance records), else the one
    `ingest --config` stored."""
    from gpupolicy.results.store import admitted_config, load_config

    admitted = admitted_config(store, name)
    if admitted is not None:
        stored, when = admitted
        source = f"admitted {when}, from {stored.source}"
    else:
        found = load_config(store, name)
        if found is None:
            return None
        stored, source = found, f"stored, from {found.source}"
    return parse_experiment(Resource(dict(stored.obj), file=stored.source, doc_index=0)), source


# -- ingest --------------------------------------------------------------------------------------


def _ingest(args: argparse.Namespace) -> int:
    from gpupolicy.results.readers import ResultsInputError, read_file
    from gpupolicy.results.store import DuplicateRun, StoredConfig, StoredRun, save_run

    config = _config_from_file(args.config, args.experiment) if args.config is not None else None
    if config is not None and not config.arm_is_declared(args.arm):
        raise UsageError(f"{args.config}: arm {args.arm!r} is not in data.arms ({', '.join(config.arms)})")
    workload = _workload_name(args.workload) if args.workload else None
    try:
        runs = [read_file(path, args.input_format) for path in args.files]
    except ResultsInputError as exc:
        raise UsageError(str(exc)) from exc
    store = open_store_from_args(args, create=True)
    try:
        stored = StoredRun(
            experiment=args.experiment,
            arm=args.arm,
            repeat=args.repeat,
            format=",".join(dict.fromkeys(run.format for run in runs)),
            files=[str(path) for path in args.files],
            # Several files of one run are parallel load generators: the run lasts as long as the longest.
            duration_s=max(run.duration_s for run in runs),
            gpus=args.gpus or 0.0,
            gpu_source="--gpus",
            samples=[sample for run in runs for sample in run.samples],
            run_date=next((run.date for run in runs if run.date), None),
        )
        policy = _policy(args.policy) if args.policy or args.node_pool else None
        if workload is not None:
            _join_provenance(store, stored, workload, policy)
        _set_price(stored, args, policy)
        saved_config = (
            StoredConfig(args.experiment, str(args.config), config.resource.obj)
            if config is not None
            else None
        )
        try:
            save_run(store, stored, config=saved_config, replace=args.replace)
        except DuplicateRun as exc:
            raise UsageError(str(exc)) from exc
    finally:
        store.close()
    errors = sum(1 for sample in stored.samples if not sample.ok)
    print(
        f"gpupolicy: stored run {stored.arm}#{stored.repeat} of {stored.experiment}: {len(stored.samples)} requests "
        f"({errors} failed), {stored.gpus:g} GPU(s) ({stored.gpu_source}) for {stored.duration_s:.1f} s, "
        f"price per GPU-hour: {'unknown' if stored.price_per_gpu_hour is None else f'{stored.price_per_gpu_hour:g}'}",
        file=sys.stderr,
    )
    return EXIT_CLEAN


def _workload_name(text: str) -> tuple[str, str]:
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise UsageError(f"--workload {text}: expected NAMESPACE/NAME")
    return namespace, name


def _policy(extra: list[Path]) -> Any:
    from gpupolicy.policy.loading import load_policy
    from gpupolicy.policy.validation import PolicyError

    for path in extra:
        if not path.is_file():
            raise UsageError(f"{path}: no such policy file")
    try:
        return load_policy(extra=extra)
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc


def record_gpus(record: Any) -> float:
    """GPUs per pod × replicas, summed over the record's pod templates (whole devices only: a
    shared or MIG GPU has no GPU count to multiply, pass --gpus with the share)."""
    total = 0.0
    for template in record.gpu:
        per_pod = 0.0
        for demand in template.get("resources") or []:
            if demand.get("kind") != "device":
                raise UsageError(
                    f"{record.namespace}/{record.name} uses {demand.get('kind')} GPU resource "
                    f"{demand.get('resource')}: pass --gpus with the GPUs the run occupied"
                )
            amount = demand.get("limit") or demand.get("request") or "0"
            quantity = quantity_or_none(amount)  # as the API server reads it: no "nan", no "inf"
            if quantity is None:
                raise UsageError(f"{record.namespace}/{record.name}: GPU amount {amount!r} is not a quantity")
            per_pod += float(quantity)
        if template.get("resource_claims"):
            raise UsageError(f"{record.namespace}/{record.name} claims GPUs through DRA: pass --gpus")
        replicas = template.get("replicas")
        total += per_pod * (1 if replicas is None else replicas)
    if total <= 0:
        raise UsageError(
            f"{record.namespace}/{record.name}: its provenance record shows no GPUs; pass --gpus"
        )
    return total


def _join_provenance(store: Any, run: Any, workload: tuple[str, str], policy: Any) -> None:
    from gpupolicy.results.store import workload_record

    record = workload_record(store, *workload)
    if record is None:
        raise UsageError(
            f"no provenance record of {workload[0]}/{workload[1]} in the database (admitted by the webhook?)"
        )
    for label, value, wanted in (
        ("experiment", record.experiment, run.experiment),
        ("arm", record.arm, run.arm),
    ):
        if value is not None and value != wanted:
            raise UsageError(
                f"{workload[0]}/{workload[1]} is labelled gpupolicy.io/{label}={value}, not {wanted} "
                f"(provenance record {record.uid})"
            )
    run.gpus = record_gpus(record)
    run.gpu_source = f"workload {workload[0]}/{workload[1]}"
    run.record_uid = record.uid
    run.template_hash = record.template_hash
    run.provenance = {
        "images": sorted(
            [image.get("container"), image.get("reference"), image.get("digest")] for image in record.images
        ),
        "model": record.model,
        "input": record.input,
        "placement": record.placement,
        "priority": record.priority,
        "gpu": record.gpu,
        "node_selector": [item.get("node_selector") for item in record.placement],
    }


def _set_price(run: Any, args: argparse.Namespace, policy: Any) -> None:
    from gpupolicy.policy.node_pools import node_pools, pool_for_selector

    if args.price_per_gpu_hour is not None:
        run.price_per_gpu_hour = args.price_per_gpu_hour
        return
    if args.node_pool is not None:
        pool = next((pool for pool in node_pools(policy) if pool.name == args.node_pool), None)
        if pool is None:
            raise UsageError(f"--node-pool {args.node_pool}: no such pool in the policy's nodePools")
        if pool.price_per_gpu_hour is None:
            raise UsageError(f"--node-pool {args.node_pool}: the pool has no pricePerGpuHour")
        run.node_pool, run.price_per_gpu_hour = pool.name, pool.price_per_gpu_hour
        return
    if run.provenance is None:
        return
    if policy is None:
        policy = _policy(list(args.policy))
    for selector in run.provenance["node_selector"]:
        pool = pool_for_selector(policy, selector or {})
        if pool is not None:
            run.node_pool, run.price_per_gpu_hour = pool.name, pool.price_per_gpu_hour
            return


# -- report --------------------------------------------------------------------------------------


def _report(args: argparse.Namespace) -> int:
    from gpupolicy.results.html import render_html
    from gpupolicy.results.report import build_report, render_json, render_markdown, render_table
    from gpupolicy.results.slo import SloError, slo_from
    from gpupolicy.results.stats import DEFAULT_SEED
    from gpupolicy.results.store import load_runs

    if args.output is not None and not args.output.parent.is_dir():
        raise UsageError(f"--output {args.output}: no directory {args.output.parent}")
    file_config = _config_from_file(args.config, args.experiment) if args.config is not None else None
    store = open_store_from_args(args)
    try:
        if file_config is not None:
            config, source = file_config, str(args.config)
        else:
            found = _config_from_store(store, args.experiment)
            if found is None:
                raise UsageError(
                    f"no experiment config {args.experiment} in the database: pass --config FILE "
                    "(results ingest --config stores it)"
                )
            config, source = found
        runs = load_runs(store, args.experiment)
    finally:
        store.close()
    if not runs:
        raise UsageError(f"no runs of experiment {args.experiment} in the database (results ingest)")
    try:
        slo = slo_from(config.slo, args.slo)
    except SloError as exc:
        where = "--slo" if args.slo is not None else f"{source}: data.slo"
        raise UsageError(f"{where}: {exc}") from exc
    _check_slo_data(slo, runs)
    seed = DEFAULT_SEED if args.seed is None else args.seed
    report = build_report(
        args.experiment, config, source, slo, runs, seed=seed, price_override=args.price_per_gpu_hour
    )
    renderers = {"table": render_table, "json": render_json, "markdown": render_markdown, "html": render_html}
    text = renderers[args.format](report)
    if args.output is None:
        sys.stdout.write(text)
    else:
        partial = args.output.with_name(args.output.name + ".partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(args.output)
    failing = FAIL_ON[args.fail_on]
    return EXIT_FINDINGS if any(t.verdict in failing for t in report.treatments) else EXIT_CLEAN


def _check_slo_data(slo: Any, runs: list[Any]) -> None:
    """An objective on TTFT or TPOT needs runs that measured them (k6 measures neither)."""
    for objective in slo.per_request:
        if objective.metric == "e2e":
            continue
        field = f"{objective.metric}_ms"
        for run in runs:
            if any(s.ok for s in run.samples) and all(getattr(s, field) is None for s in run.samples if s.ok):
                raise UsageError(
                    f"the SLO {objective.text()} needs {objective.metric.upper()}, which run {run.label} "
                    f"({run.format}) does not measure"
                )
