"""Which model a serving container loads, and at which revision.

Sources, in the order they are read:

- the workload annotation `gpupolicy.io/model: org/name@revision` (DESIGN.md vocabulary);
- vLLM: `vllm serve MODEL`, `--model MODEL` / `--model=MODEL` (also `python -m
  vllm.entrypoints.openai.api_server`), or the first argument of the vllm-openai image run without a
  command (its entrypoint is `vllm serve`), with `--revision`
  (https://docs.vllm.ai/en/latest/configuration/engine_args.html);
- SGLang: `--model-path`, with `--revision`;
- Hugging Face TGI: `--model-id` or env `MODEL_ID`, with `--revision` or env `REVISION`
  (https://huggingface.co/docs/text-generation-inference/reference/launcher);
- Triton: `--model-repository` (a repository of versioned models, not one model), `--load-model`
  (https://docs.nvidia.com/deeplearning/triton-inference-server/user-guide/docs/user_guide/model_repository.html);
- NVIDIA NIM: the model is the image (`nvcr.io/nim/<org>/<model>:<version>`), or env
  `NIM_MODEL_NAME` (https://docs.nvidia.com/nim/large-language-models/latest/configuration.html).

- KServe: `storageUri` / LLMInferenceService `spec.model.uri` as `hf://org/name[:revision]`
  (https://kserve.github.io/website/latest/modelserving/storage/huggingface/hf/);
- KubeRay RayService `serveConfigV2`: Ray Serve LLM's `model_loading_config.model_source` (revision
  in `engine_kwargs.revision`), or a `MODEL_ID` env var of the application's runtime_env
  (https://docs.ray.io/en/latest/serve/llm/serving-llms.html).

Arguments written as one shell string (`sh -c "vllm serve …"`) are split like a shell would;
`$(VAR)` (Kubernetes) and `$VAR`/`${VAR}` (shell) are resolved from the container's literal env.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

import yaml

from gpupolicy.core.findings import JsonPath
from gpupolicy.core.immutable import immutable
from gpupolicy.kube.images import parse_image
from gpupolicy.kube.placeholders import symbolic_name
from gpupolicy.kube.pod_spec import Container, as_list, as_mapping
from gpupolicy.loading.composer import compose_document
from gpupolicy.loading.documents import UnreadableValue, construct

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
# What shows that the container runs the server an env variable configures (its image or its
# command): `MODEL_ID` is TGI's, and a client that names the model a remote server serves (a
# Gradio app's MODEL_ID beside INFERENCE_SERVER_URL) serves none.
# Servers whose subcommand is followed by the model as a positional argument: vLLM's `vllm serve
# MODEL`, LMDeploy's `lmdeploy serve api_server MODEL` (lmdeploy/cli/serve.py; `--revision` as vLLM's).
SERVE_SUBCOMMANDS: dict[str, tuple[str, ...]] = {"vllm": ("serve",), "lmdeploy": ("serve", "api_server")}
SERVER_SIGNS = {"tgi": ("text-generation", "tgi"), "nim": ("nvcr.io/nim/", "nim")}
REVISION_ENV = frozenset({"REVISION"})
# vLLM's OpenAI-compatible server image, whose ENTRYPOINT is `vllm serve`
# (https://docs.vllm.ai/en/latest/deployment/docker.html: `docker run … vllm/vllm-openai <model> <args>`).
VLLM_IMAGE = "vllm-openai"
NIM_IMAGE = re.compile(r"^nvcr\.io/nim/")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@immutable
class ModelRef:
    name: str  # as resolved: "meta-llama/Llama-3.1-8B-Instruct", "gs://bucket/repo", "/models/x"
    revision: str | None
    server: str  # "annotation", "vllm", "lmdeploy", "tgi", "sglang", "triton", "nim"
    path: JsonPath  # where the model is named

    @property
    def is_local(self) -> bool:
        """A path inside the container or on a volume: what it holds is not named here."""
        return self.name.startswith(("/", "./", "~", "file://"))

    @property
    def is_unresolved(self) -> bool:
        """Still a variable reference (its env var comes from a Secret or ConfigMap), or an
        all-capitals name left to fill in (`V_MODEL_PATH`: GP004's placeholder)."""
        return "$" in self.name or "{{" in self.name or symbolic_name(self.name)

    @property
    def pinned(self) -> bool:
        return self.revision is not None and self.revision.strip().lower() not in FLOATING_REVISIONS


def parse_annotation(value: str) -> tuple[str, str | None]:
    """`org/name@revision` → (name, revision)."""
    name, at, revision = value.strip().partition("@")
    return name.strip(), (revision.strip() or None) if at else None


def literal_env(container: Container) -> dict[str, tuple[str, JsonPath]]:
    """Env vars with a literal value: name → (value, path of the value)."""
    found: dict[str, tuple[str, JsonPath]] = {}
    for path, item in container.env_items():
        name, value = item.get("name"), item.get("value")
        if isinstance(name, str) and value is not None and not isinstance(value, (dict, list)):
            found[name] = (str(value), (*path, "value"))
    return found


def expand(text: str, env: dict[str, tuple[str, JsonPath]]) -> str:
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
                word = word.strip()  # `\\` + newline continuations leave the newline in the word
                if word:
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
    for position, (word, _) in enumerate(words[:-1]):  # `vllm serve MODEL`, `lmdeploy serve api_server MODEL`
        program = word.rsplit("/", 1)[-1]
        subcommand = SERVE_SUBCOMMANDS.get(program)
        if subcommand is None:
            continue
        at = position + 1 + len(subcommand)
        if tuple(item for item, _ in words[position + 1 : at]) == subcommand and at < len(words):
            model, model_path = words[at]
            if not model.startswith("-"):
                found.append(ModelRef(model, revision, program, model_path))
    if not found and not container.spec.get("command") and VLLM_IMAGE in container.image.lower() and words:
        # vLLM's image runs `vllm serve` (its ENTRYPOINT): a first argument that is no flag is the model.
        model, model_path = words[0]
        if not model.startswith("-") and model != "serve":
            found.append(ModelRef(model, revision, "vllm", model_path))
    if not found:
        for name, server in MODEL_ENV.items():
            if name in env and _runs(server, container):
                found.append(ModelRef(env[name][0], revision, server, env[name][1]))
    if not found and container.image:
        ref = parse_image(container.image)
        if ref is not None and NIM_IMAGE.match(f"{ref.registry}/{ref.repository}"):
            version = ref.digest if ref.pinned else ref.tag
            found.append(ModelRef(ref.name, version, "nim", container.field("image")))
    return found


def _runs(server: str, container: Container) -> bool:
    """Whether the container's image or command is the `server`'s (SERVER_SIGNS)."""
    text = " ".join([container.image, *(str(word) for word, _ in tokens(container))]).lower()
    return any(sign in text for sign in SERVER_SIGNS[server])


# One server spread over several pods, each a rank of the same model: SGLang's `--nnodes N`
# with `--node-rank R` (https://docs.sglang.io/references/multi_node_deployment/multi_node.html),
# vLLM's own multi-node mode and torchrun's `--nnodes` (`MIN:MAX` when elastic) read alike.
NODES_FLAGS = frozenset({"--nnodes"})


def nodes_per_instance(container: Container) -> int | None:
    """How many pods (nodes) one instance of the container's server spans, when its command
    line says more than one."""
    env = literal_env(container)
    words = [(expand(word, env), path) for word, path in tokens(container)]
    for _, value, _ in _flag_values(words, NODES_FLAGS):
        count = value.rpartition(":")[2]
        if count.isascii() and count.isdigit() and 1 < int(count) <= 100_000:
            return int(count)
    return None


HF_SCHEME = "hf://"
# serveConfigV2 is a YAML document inside a string: read at most this much, and visit at most this
# many of its nodes (aliases may make a small text a huge tree).
SERVE_CONFIG_LIMIT = 256 * 1024
SERVE_CONFIG_VISITS = 20_000


def hf_uri_model(uri: str, path: JsonPath, server: str) -> ModelRef | None:
    """`hf://org/name` or `hf://org/name:revision` (KServe's Hugging Face storage URIs)."""
    if not uri.startswith(HF_SCHEME):
        return None
    name, colon, revision = uri[len(HF_SCHEME) :].partition(":")
    return ModelRef(name, revision if colon else None, server, path)


def workload_models(kind: str, obj: Any) -> list[ModelRef]:
    """Models a serving CRD names outside its containers' command lines."""
    spec = as_mapping(as_mapping(obj).get("spec"))
    found: list[ModelRef] = []
    if kind == "LLMInferenceService":
        uri = as_mapping(spec.get("model")).get("uri")
        if isinstance(uri, str) and (model := hf_uri_model(uri, ("spec", "model", "uri"), "kserve")):
            found.append(model)
    elif kind == "InferenceService":
        predictor = as_mapping(spec.get("predictor"))
        for base in (("spec", "predictor"), ("spec", "predictor", "model")):
            body = predictor if len(base) == 2 else as_mapping(predictor.get("model"))
            uri = body.get("storageUri")
            if isinstance(uri, str) and (model := hf_uri_model(uri, (*base, "storageUri"), "kserve")):
                found.append(model)
    elif kind == "RayService":
        text = spec.get("serveConfigV2")
        if isinstance(text, str):
            found.extend(_serve_config_models(text))
    return found


def served_names(kind: str, obj: Any) -> frozenset[str]:
    """The names under which a serving CRD serves its model (KServe's LLMInferenceService
    `spec.model.name`): a container told to serve under that name (`--model Model-A`) serves the
    CRD's model, not another."""
    if kind != "LLMInferenceService":
        return frozenset()
    name = as_mapping(as_mapping(as_mapping(obj).get("spec")).get("model")).get("name")
    return frozenset({name}) if isinstance(name, str) and name else frozenset()


def _serve_config_models(text: str) -> list[ModelRef]:
    path: JsonPath = ("spec", "serveConfigV2")
    try:  # built as documents are: alias expansion and depth within the loader's limits
        root = compose_document(text[:SERVE_CONFIG_LIMIT])
        config = construct(root)[0] if root is not None else None
    except (yaml.YAMLError, UnreadableValue, RecursionError):
        return []
    found: list[ModelRef] = []
    budget = [SERVE_CONFIG_VISITS]
    for app in as_list(as_mapping(config).get("applications")):
        for section in _mappings(app, budget):
            loading = as_mapping(section.get("model_loading_config"))
            source = loading.get("model_source") or loading.get("model_id")
            if isinstance(source, str):
                revision = as_mapping(section.get("engine_kwargs")).get("revision")
                found.append(ModelRef(source, revision if isinstance(revision, str) else None, "ray", path))
            env = as_mapping(as_mapping(section.get("runtime_env")).get("env_vars"))
            if isinstance(env.get("MODEL_ID"), str):
                revision = env.get("REVISION") or env.get("MODEL_REVISION")
                found.append(
                    ModelRef(env["MODEL_ID"], revision if isinstance(revision, str) else None, "ray", path)
                )
    return found


def _mappings(value: Any, budget: list[int]) -> Iterator[dict[str, Any]]:
    """Every mapping inside `value`, within a budget of visits (aliases share subtrees)."""
    stack = [value]
    while stack and budget[0] > 0:
        budget[0] -= 1
        item = stack.pop()
        if isinstance(item, dict):
            yield item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
