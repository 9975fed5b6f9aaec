"""Which model a serving container loads, and at which revision.

Sources, in the order they are read:

- the workload annotation `gpupolicy.io/model: org/name@revision` (DESIGN.md vocabulary);
- vLLM: `vllm serve MODEL`, `--model MODEL` / `--model=MODEL` (also `python -m
  vllm.entrypoints.openai.api_server`), with `--revision`
  (https://docs.vllm.ai/en/latest/configuration/engine_args.html);
- SGLang: `--model-path`, with `--revision`;
- Hugging Face TGI: `--model-id` or env `MODEL_ID`, with `--revision` or env `REVISION`
  (https://huggingface.co/docs/text-generation-inference/reference/launcher);
- Triton: `--model-repository` (a repository of versioned models, not one model), `--load-model`
  (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/model_repository.html);
- NVIDIA NIM: the model is the image (`nvcr.io/nim/<org>/<model>:<version>`), or env
  `NIM_MODEL_NAME` (https://docs.nvidia.com/nim/large-language-models/latest/configuration.html).

Arguments written as one shell string (`sh -c "vllm serve …"`) are split like a shell would;
`$(VAR)` (Kubernetes) and `$VAR`/`${VAR}` (shell) are resolved from the container's literal env.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass

from gpupolicy.findings import JsonPath
from gpupolicy.images import parse_image
from gpupolicy.pod_spec import Container, as_list, as_mapping

MODEL_ANNOTATION = "gpupolicy.io/model"
# Revisions that name a moving branch, not a fixed snapshot.
FLOATING_REVISIONS = frozenset({"", "main", "master", "latest", "head"})

MODEL_FLAGS = {
    "--model": "vllm",
    "--model-id": "tgi",
    "--model-path": "sglang",
    "--model-repository": "triton",
    "--load-model": "triton",
}
REVISION_FLAGS = frozenset({"--revision"})
MODEL_ENV = {"MODEL_ID": "tgi", "NIM_MODEL_NAME": "nim"}
REVISION_ENV = frozenset({"REVISION"})
NIM_IMAGE = re.compile(r"^nvcr\.io/nim/")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True, slots=True)
class ModelRef:
    name: str  # as resolved: "meta-llama/Llama-3.1-8B-Instruct", "gs://bucket/repo", "/models/x"
    revision: str | None
    server: str  # "annotation", "vllm", "tgi", "sglang", "triton", "nim"
    path: JsonPath  # where the model is named

    @property
    def is_local(self) -> bool:
        """A path inside the container or on a volume: what it holds is not named here."""
        return self.name.startswith(("/", "./", "~", "file://"))

    @property
    def is_unresolved(self) -> bool:
        """Still a variable reference (its env var comes from a Secret or ConfigMap)."""
        return "$" in self.name or "{{" in self.name

    @property
    def pinned(self) -> bool:
        return self.revision is not None and self.revision.strip().lower() not in FLOATING_REVISIONS


def parse_annotation(value: str) -> tuple[str, str | None]:
    """`org/name@revision` → (name, revision)."""
    name, at, revision = value.strip().partition("@")
    return name.strip(), (revision.strip() or None) if at else None


def literal_env(container: Container) -> dict[str, tuple[str, int]]:
    """Env vars with a literal value: name → (value, index in `env`)."""
    found: dict[str, tuple[str, int]] = {}
    for index, item in enumerate(as_list(container.spec.get("env"))):
        item = as_mapping(item)
        name, value = item.get("name"), item.get("value")
        if isinstance(name, str) and value is not None and not isinstance(value, (dict, list)):
            found[name] = (str(value), index)
    return found


def expand(text: str, env: dict[str, tuple[str, int]]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group)
        return env[name][0] if name in env else match.group(0)

    return _VAR.sub(replace, text)


def tokens(container: Container) -> Iterator[tuple[str, JsonPath]]:
    """Every word of command + args, with the path of the list item it came from."""
    for key in ("command", "args"):
        for index, item in enumerate(as_list(container.spec.get(key))):
            if not isinstance(item, (str, int, float)):
                continue
            text = str(item)
            words = [text]
            if any(space in text for space in " \n\t"):
                try:
                    words = shlex.split(text, comments=False)
                except ValueError:
                    words = text.split()
            for word in words:
                yield word, container.field(key, index)


def _flag_values(
    words: list[tuple[str, JsonPath]], flags: frozenset[str] | set[str]
) -> Iterator[tuple[str, str, JsonPath]]:
    for position, (word, path) in enumerate(words):
        flag, equals, inline = word.partition("=")
        if flag not in flags:
            continue
        if equals:
            yield flag, inline, path
        elif position + 1 < len(words) and not words[position + 1][0].startswith("--"):
            yield flag, words[position + 1][0], words[position + 1][1]


def models_of(container: Container) -> list[ModelRef]:
    """The models the container's server loads, as its command line and env name them."""
    env = literal_env(container)
    words = [(expand(word, env), path) for word, path in tokens(container)]
    revision = next((value for _, value, _ in _flag_values(words, REVISION_FLAGS)), None)
    if revision is None:
        revision = next((env[name][0] for name in REVISION_ENV if name in env), None)
    found: list[ModelRef] = []
    for flag, value, path in _flag_values(words, set(MODEL_FLAGS)):
        found.append(ModelRef(value, revision, MODEL_FLAGS[flag], path))
    for position, (word, _) in enumerate(words[:-1]):  # `vllm serve MODEL`
        following, path = words[position + 1]
        if word.rsplit("/", 1)[-1] == "vllm" and following == "serve" and position + 2 < len(words):
            model, model_path = words[position + 2]
            if not model.startswith("-"):
                found.append(ModelRef(model, revision, "vllm", model_path))
    if not found:
        for name, server in MODEL_ENV.items():
            if name in env:
                found.append(
                    ModelRef(env[name][0], revision, server, container.field("env", env[name][1], "value"))
                )
    if not found and container.image:
        ref = parse_image(container.image)
        if ref is not None and NIM_IMAGE.match(f"{ref.registry}/{ref.repository}"):
            version = ref.digest if ref.pinned else ref.tag
            found.append(ModelRef(ref.name, version, "nim", container.field("image")))
    return found
