"""Input that once gave a traceback, exit 1 or an internal error on every object: each is now
one line naming file and line — exit 2 for a policy or configuration error; for manifests, a
finding (exit 1), with the other documents still linted."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpupolicy.cli.main import EXIT_FINDINGS, EXIT_USAGE, main

GOOD = """\
apiVersion: v1
kind: Pod
metadata: {name: good, namespace: ns}
spec:
  hostNetwork: true
  containers: [{name: c, image: "registry.example.com/app:1.0"}]
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["lint", "--no-repo-policy", "--color", "never", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err, err
    return code, out, err


def test_an_unknown_boolean_in_a_manifest_is_a_finding_and_the_rest_is_linted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "maybe.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {x: !!bool maybe}\n---\n" + GOOD
    )
    code, out, _ = run(capsys, str(manifest))
    assert f"{manifest}:4:11: GP001" in out or "maybe.yaml:4:11: GP001" in out
    assert "GP605" in out  # the second document
    assert code == EXIT_FINDINGS  # input that could not be read is a finding (GP001), not a usage error


def test_a_symlink_loop_in_a_linted_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "good.yaml").write_text(GOOD)
    (tmp_path / "a.yaml").symlink_to(tmp_path / "b.yaml")
    (tmp_path / "b.yaml").symlink_to(tmp_path / "a.yaml")
    code, out, _ = run(capsys, str(tmp_path))
    unreadable = [line for line in out.splitlines() if "GP001" in line]
    assert len(unreadable) == 2 and all("cannot read file" in line for line in unreadable)
    assert "a.yaml" in unreadable[0] and "b.yaml" in unreadable[1]
    assert "GP605" in out
    assert code == EXIT_FINDINGS


@pytest.fixture
def unreadable_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A subdirectory that cannot be listed. Tests run as root, which reads every folder whatever
    its mode: the refusal is made at the edge, in Path.iterdir (what the walk calls)."""
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "hidden.yaml").write_text(GOOD)
    (tmp_path / "good.yaml").write_text(GOOD)
    real = pathlib.Path.iterdir

    def iterdir(self: Path) -> Iterator[Path]:
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(pathlib.Path, "iterdir", iterdir)
    return tmp_path


def test_an_unreadable_subdirectory_is_a_finding(
    unreadable_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, str(unreadable_folder))
    (line,) = [line for line in out.splitlines() if "GP001" in line]
    assert "locked" in line and "cannot read directory: Permission denied" in line
    assert out.count("GP605") == 1  # good.yaml, linted
    assert code == EXIT_FINDINGS


@pytest.mark.parametrize(
    ("policy", "line", "words"),
    [
        ("gpu:\n  servingImages: ['vllm(']\n", 2, "missing ): vllm("),
        ("gpu:\n  servingImages:\n    - ok\n    - 'tritonserver:(?!.*-sdk)'\n", 4, "lookahead"),
        (
            "gpu:\n  vendors:\n    - name: nvidia\n      domains: [nvidia.com]\n      migResourcePatterns: ['[a-']\n",
            5,
            "missing ]",
        ),
        ('kubernetesVersion: "1.0"\n', 1, "Kubernetes 1.0 is older than gpupolicy supports (1.16)"),
        ("limits: {maxDepth: 100000}\n", 1, "100000 is greater than the maximum of 250"),
        ("webhook: {onRuleError: ignore}\n", 1, "'ignore' is not one of ['deny', 'allow']"),
    ],
)
def test_a_bad_policy_is_one_line_naming_file_and_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, line: int, words: str
) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(policy)
    manifest = tmp_path / "good.yaml"
    manifest.write_text(GOOD)
    code, out, err = run(capsys, "--policy", str(policy_file), str(manifest))
    assert code == EXIT_USAGE
    assert out == ""
    (message,) = err.strip().splitlines()
    assert message.startswith(f"gpupolicy: {policy_file}:{line}:"), message
    assert words in message, message
