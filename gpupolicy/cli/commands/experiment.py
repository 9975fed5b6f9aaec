"""`gpupolicy experiment diff`: which dimensions two experiment arms differ in, path by path.

    gpupolicy experiment diff CONTROL TREATMENT [--format text|json]
    gpupolicy experiment diff --experiment NAME PATH [--format text|json]

CONTROL and TREATMENT are files or directories holding one workload each. With --experiment,
PATH is loaded whole, the experiment ConfigMap NAME gives the fixed dimensions and the declared
variables, and every treatment arm is compared with the control arm. Exit codes: 0 every arm is a
valid single-variable arm; 1 some arm is not (or there is no control); 2 usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpupolicy.core.exit_codes import EXIT_CLEAN, EXIT_FINDINGS, UsageError
from gpupolicy.core.findings import format_path
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.experiment_arms import ArmComparison, arm_link, compare_arms
from gpupolicy.kube.experiments import (
    CONTROL_ARM,
    ExperimentConfig,
    is_experiment_config,
    parse_experiment,
    vocabulary_for,
)
from gpupolicy.kube.gpu import GpuCatalog
from gpupolicy.kube.inventory import namespace_of
from gpupolicy.kube.pod_spec import Workload, workload_of
from gpupolicy.loading.documents import Resource

DEFAULT_FIXED = ("image", "model", "input")


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    experiment = commands.add_parser("experiment", help="inspect experiments (diff two arms)")
    actions = experiment.add_subparsers(dest="experiment_action", metavar="ACTION", required=True)
    diff = actions.add_parser(
        "diff",
        help="report the dimensions two arms differ in, path by path, and the verdict",
        description="Compare CONTROL with TREATMENT (files or directories with one workload each), "
        "or, with --experiment NAME PATH, every treatment arm of the experiment with its control arm.",
    )
    diff.add_argument("paths", nargs="+", metavar="PATH", help="CONTROL TREATMENT, or PATH with --experiment")
    diff.add_argument("--experiment", "-e", metavar="NAME", help="the experiment ConfigMap's name")
    diff.add_argument("--format", "-f", choices=["text", "json"], default="text")
    diff.add_argument("--policy", "-p", type=Path, action="append", default=[], metavar="FILE")
    diff.set_defaults(handler=run)


@immutable
class ArmReport:
    control: Workload
    treatment: Workload
    comparison: ArmComparison


def _load(path: str) -> list[Resource]:
    from gpupolicy.loading.inputs import load_paths

    if not Path(path).exists():
        raise UsageError(f"{path}: no such file or directory")
    loaded = load_paths([path])
    broken = [problem for problem in loaded.problems if problem.rule_id in ("GP001", "GP004")]
    if broken:
        problem = broken[0]
        raise UsageError(f"{problem.file}:{problem.line or 1}: {problem.message}")
    return loaded.resources


def _workloads(resources: Sequence[Resource]) -> list[Workload]:
    return [workload for resource in resources if (workload := workload_of(resource)) is not None]


def _single_workload(path: str, resources: Sequence[Resource]) -> Workload:
    workloads = _workloads(resources)
    if len(workloads) != 1:
        found = ", ".join(f"{w.kind} {w.name}" for w in workloads) or "none"
        raise UsageError(f"{path}: expected one workload, found {len(workloads)} ({found}); name a file")
    return workloads[0]


def _experiment_config(name: str, resources: Sequence[Resource]) -> ExperimentConfig | None:
    vocabulary = vocabulary_for(None)
    for resource in resources:
        if resource.kind == "ConfigMap" and resource.name == name and is_experiment_config(resource.obj):
            return parse_experiment(resource, vocabulary)
    return None


def _gpu_catalog(anchor: str, extra: list[Path]) -> GpuCatalog:
    from gpupolicy.policy.loading import load_policy
    from gpupolicy.policy.repo_policies import find_repo_policy
    from gpupolicy.policy.validation import PolicyError

    try:
        return load_policy(repo_policy=find_repo_policy(Path(anchor)), extra=extra).gpu
    except PolicyError as exc:
        raise UsageError(str(exc)) from exc


def _pairs(args: argparse.Namespace) -> tuple[list[ArmReport], ExperimentConfig | None]:
    gpu = _gpu_catalog(args.paths[0], args.policy)
    if args.experiment:
        if len(args.paths) != 1:
            raise UsageError("with --experiment NAME give one PATH (a file or directory)")
        resources = _load(args.paths[0])
        config = _experiment_config(args.experiment, resources)
        if config is None:
            raise UsageError(f"{args.paths[0]}: no experiment ConfigMap named {args.experiment}")
        arms = [
            (w, link)
            for w in _workloads(resources)
            if (link := arm_link(w))
            and link.experiment == args.experiment
            and namespace_of(w.resource) == namespace_of(config.resource)  # arms live beside their ConfigMap
        ]
        controls = [w for w, link in arms if link.arm == CONTROL_ARM]
        treatments = [w for w, link in arms if link.arm != CONTROL_ARM]
        if not controls:
            raise UsageError(f"experiment {args.experiment} has no arm labelled gpupolicy.io/arm: control")
        if not treatments:
            raise UsageError(f"experiment {args.experiment} has no treatment arm")
        reports = [
            ArmReport(
                controls[0],
                t,
                compare_arms(controls[0], t, gpu=gpu, fixed=config.fixed, declared=config.variables),
            )
            for t in treatments
        ]
        return reports, config
    if len(args.paths) != 2:
        raise UsageError("give CONTROL and TREATMENT (files or directories), or --experiment NAME PATH")
    control_resources, treatment_resources = _load(args.paths[0]), _load(args.paths[1])
    control = _single_workload(args.paths[0], control_resources)
    treatment = _single_workload(args.paths[1], treatment_resources)
    link = arm_link(treatment) or arm_link(control)
    config = _experiment_config(link.experiment, [*control_resources, *treatment_resources]) if link else None
    if link is not None and config is None:  # the ConfigMap usually sits beside the arms
        folders = dict.fromkeys(Path(p).parent if Path(p).is_file() else Path(p) for p in args.paths)
        beside = [resource for folder in folders for resource in _load(str(folder))]
        config = _experiment_config(link.experiment, beside)
    fixed = config.fixed if config else list(DEFAULT_FIXED)
    declared = config.variables if config else []
    return [
        ArmReport(
            control, treatment, compare_arms(control, treatment, gpu=gpu, fixed=fixed, declared=declared)
        )
    ], config


def _value(value: Any) -> str:
    if value is None:
        return "(absent)"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _describe(workload: Workload) -> str:
    namespace = f"{workload.namespace}/" if workload.namespace else ""
    return f"{workload.kind} {namespace}{workload.name} ({workload.resource.file})"


def render_text(reports: Sequence[ArmReport], config: ExperimentConfig | None) -> str:
    lines: list[str] = []
    if config is not None:
        declared = ", ".join(config.variables) or "not declared"
        lines.append(f"experiment: {config.name} (fixed: {', '.join(config.fixed)}; variables: {declared})")
    for report in reports:
        comparison = report.comparison
        lines += ["", f"control:   {_describe(report.control)}", f"treatment: {_describe(report.treatment)}"]
        for dimension in comparison.dimensions:
            diffs = [diff for diff in comparison.diffs if diff.dimension == dimension]
            mark = " (fixed)" if dimension in comparison.fixed else ""
            lines.append(f"\n{dimension}{mark}: {len(diffs)} path{'s' if len(diffs) != 1 else ''}")
            for diff in diffs:
                lines.append(f"  {diff.shown_path}")
                if diff.a_path is not None and diff.a_path != diff.path:
                    lines.append(f"    (control: {format_path(diff.a_path)[2:]})")
                lines.append(f"    control:   {_value(diff.a_value)}")
                lines.append(f"    treatment: {_value(diff.b_value)}")
        lines.append(f"\nverdict: {comparison.verdict()}")
    return "\n".join(lines).lstrip("\n") + "\n"


def _ref(workload: Workload) -> dict[str, Any]:
    return {
        "kind": workload.kind,
        "namespace": workload.namespace,
        "name": workload.name,
        "file": workload.resource.file,
        "arm": link.arm if (link := arm_link(workload)) else None,
    }


def render_json(reports: Sequence[ArmReport], config: ExperimentConfig | None) -> str:
    document = {
        "experiment": None
        if config is None
        else {"name": config.name, "fixed": config.fixed, "variables": config.variables, "arms": config.arms},
        "comparisons": [
            {
                "control": _ref(report.control),
                "treatment": _ref(report.treatment),
                "dimensions": report.comparison.dimensions,
                "diffs": [
                    {
                        "dimension": diff.dimension,
                        "path": format_path(diff.path),
                        "control_path": format_path(diff.a_path) if diff.a_path is not None else None,
                        "control": diff.a_value,
                        "treatment": diff.b_value,
                        "fixed": diff.dimension in report.comparison.fixed,
                    }
                    for diff in report.comparison.diffs
                ],
                "ok": report.comparison.ok,
                "verdict": report.comparison.verdict(),
            }
            for report in reports
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"


def run(args: argparse.Namespace) -> int:
    reports, config = _pairs(args)
    render = render_json if args.format == "json" else render_text
    sys.stdout.write(render(reports, config))
    return EXIT_CLEAN if all(report.comparison.ok for report in reports) else EXIT_FINDINGS
