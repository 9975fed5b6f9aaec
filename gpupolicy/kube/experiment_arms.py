"""The arms of an experiment: how a workload names its experiment and arm (labels on the object or
its pod template), and how two arms differ, dimension by dimension and in their fixed factors
(one variable at a time: docs/experiments.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.core.vocabulary import ARM_LABEL, EXPERIMENT_LABEL
from gpupolicy.kube.gpu import GpuCatalog
from gpupolicy.kube.pod_spec import Workload

if TYPE_CHECKING:
    from gpupolicy.kube.dimensions import DimensionDiff


@immutable
class ArmLink:
    """How a workload names its experiment and arm, with the paths of the labels."""

    experiment: str
    experiment_path: JsonPath
    arm: str | None
    arm_path: JsonPath | None


def arm_link(workload: Workload) -> ArmLink | None:
    """The workload's experiment labels (on the object, or else on its first pod template)."""
    sources: list[tuple[Mapping[str, Any], JsonPath]] = [(workload.labels, ("metadata", "labels"))]
    for template in workload.templates:
        if template.metadata_path is not None:
            sources.append((template.labels, (*template.metadata_path, "labels")))
    for labels, base in sources:
        experiment = labels.get(EXPERIMENT_LABEL)
        if isinstance(experiment, str) and experiment:
            arm = labels.get(ARM_LABEL)
            arm_text = str(arm) if arm is not None and str(arm) else None
            return ArmLink(
                experiment, (*base, EXPERIMENT_LABEL), arm_text, (*base, ARM_LABEL) if arm_text else None
            )
    return None


@immutable
class ArmComparison:
    """A treatment arm against the control arm under an experiment's rules."""

    diffs: list[DimensionDiff]
    fixed: Sequence[str]
    declared: Sequence[str]

    @property
    def dimensions(self) -> list[str]:
        return list(dict.fromkeys(diff.dimension for diff in self.diffs))

    @property
    def fixed_drift(self) -> list[DimensionDiff]:
        return [diff for diff in self.diffs if diff.dimension in self.fixed]

    @property
    def variables(self) -> list[str]:
        """Dimensions that differ and are not fixed (fixed drift is its own finding)."""
        return [dim for dim in self.dimensions if dim not in self.fixed]

    @property
    def undeclared(self) -> list[str]:
        return [dim for dim in self.variables if self.declared and dim not in self.declared]

    @property
    def multiple(self) -> bool:
        return len(self.variables) > 1

    @property
    def ok(self) -> bool:
        return len(self.variables) == 1 and not self.fixed_drift and not self.undeclared

    def verdict(self) -> str:
        if self.fixed_drift:
            drifted = ", ".join(dict.fromkeys(diff.dimension for diff in self.fixed_drift))
            head = f"fixed factor(s) differ: {drifted}"
            return head + ("; " + self._variable_verdict() if self.variables else "")
        return self._variable_verdict()

    def _variable_verdict(self) -> str:
        variables = self.variables
        if not variables:
            return "no dimension differs: the treatment is identical to the control"
        if len(variables) > 1:
            return f"{len(variables)} dimensions differ ({', '.join(variables)}): change one variable per arm"
        if self.undeclared:
            return f"one dimension differs ({variables[0]}), but it is not a declared variable ({', '.join(self.declared)})"
        return f"one dimension differs ({variables[0]}): a valid single-variable arm"


def compare_arms(
    control: Workload,
    treatment: Workload,
    *,
    gpu: GpuCatalog | None = None,
    fixed: Iterable[str] = ("image", "model", "input"),
    declared: Iterable[str] = (),
) -> ArmComparison:
    from gpupolicy.kube.dimensions import diff_workloads  # here: only experiments with arms compare them

    return ArmComparison(diff_workloads(control, treatment, gpu=gpu), tuple(fixed), tuple(declared))
