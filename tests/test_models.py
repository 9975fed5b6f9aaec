"""Model identity and revision from the annotation and the server command lines."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpupolicy.kube.models import ModelRef, models_of, nodes_per_instance, parse_annotation
from gpupolicy.kube.pod_spec import Container, workload_of
from gpupolicy.loading.inputs import load_text


def container_of(spec: dict[str, Any]) -> Container:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", **spec}]},
    }
    workload = workload_of(load_text(yaml.safe_dump(pod), "p.yaml").resources[0])
    assert workload is not None
    return workload.templates[0].containers[0]


def summary(models: list[ModelRef]) -> list[tuple[str, str | None, str]]:
    return [(m.name, m.revision, m.server) for m in models]


def test_annotation() -> None:
    assert parse_annotation("org/name@abc123") == ("org/name", "abc123")
    assert parse_annotation("org/name") == ("org/name", None)
    assert parse_annotation("org/name@") == ("org/name", None)


def test_vllm_flag_and_revision() -> None:
    c = container_of(
        {"image": "vllm/vllm-openai:v0.8.5", "args": ["--model", "Qwen/Qwen3-8B", "--revision=abc1234"]}
    )
    assert summary(models_of(c)) == [("Qwen/Qwen3-8B", "abc1234", "vllm")]
    assert models_of(c)[0].path == ("spec", "containers", 0, "args", 1)


def test_vllm_serve_positional_in_a_shell_string() -> None:
    c = container_of(
        {
            "image": "x:1",
            "command": ["/bin/sh", "-c"],
            "args": ["exec vllm serve meta-llama/Llama-3.1-8B --tensor-parallel-size 2"],
        }
    )
    assert summary(models_of(c)) == [("meta-llama/Llama-3.1-8B", None, "vllm")]
    assert models_of(c)[0].path == ("spec", "containers", 0, "args", 0)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        # The image's entrypoint is `vllm serve`: its first argument is the model.
        ({"image": "vllm/vllm-openai:v0.10.0", "args": ["Qwen/Qwen3-8B", "--revision", "abc1"]},
         [("Qwen/Qwen3-8B", "abc1", "vllm")]),
        ({"image": "vllm/vllm-openai:v0.10.0", "args": ["--port", "8000"]}, []),
        # A command of its own replaces the entrypoint: the first argument is the command's.
        ({"image": "vllm/vllm-openai:v0.10.0", "command": ["python3", "app.py"], "args": ["Qwen/Qwen3-8B"]}, []),
        ({"image": "python:3.12", "args": ["Qwen/Qwen3-8B"]}, []),
    ],
)  # fmt: skip
def test_the_vllm_images_first_argument_is_the_model(
    spec: dict[str, Any], expected: list[tuple[str, str | None, str]]
) -> None:
    assert summary(models_of(container_of(spec))) == expected


def test_kubernetes_variable_expansion() -> None:
    c = container_of(
        {
            "image": "x:1",
            "args": ["--model=$(MODEL_ID)"],
            "env": [{"name": "MODEL_ID", "value": "google/gemma-2-9b-it"}],
        }
    )
    assert summary(models_of(c)) == [("google/gemma-2-9b-it", None, "vllm")]


def test_unresolved_variable_is_kept_as_written() -> None:
    c = container_of(
        {
            "image": "x:1",
            "args": ["--model=$(MODEL_ID)"],
            "env": [{"name": "MODEL_ID", "valueFrom": {"configMapKeyRef": {"name": "m", "key": "id"}}}],
        }
    )
    [model] = models_of(c)
    assert model.name == "$(MODEL_ID)" and model.is_unresolved


def test_tgi_env_with_revision() -> None:
    c = container_of(
        {
            "image": "ghcr.io/huggingface/text-generation-inference:3.2.3",
            "env": [
                {"name": "MODEL_ID", "value": "google/gemma-2-9b-it"},
                {"name": "REVISION", "value": "deadbeef"},
            ],
        }
    )
    models = models_of(c)
    assert summary(models) == [("google/gemma-2-9b-it", "deadbeef", "tgi")] and models[0].pinned
    assert models[0].path == ("spec", "containers", 0, "env", 0, "value")
    flag = container_of({"image": "x:1", "args": ["--model-id", "bigscience/bloom", "--revision", "main"]})
    assert summary(models_of(flag)) == [("bigscience/bloom", "main", "tgi")] and not models_of(flag)[0].pinned


def test_triton_and_sglang() -> None:
    triton = container_of(
        {
            "image": "nvcr.io/nvidia/tritonserver:25.01-py3",
            "command": ["tritonserver", "--model-repository=gs://bucket/models"],
        }
    )
    assert summary(models_of(triton)) == [("gs://bucket/models", None, "triton")]
    local = container_of({"image": "x:1", "command": ["tritonserver", "--model-repository=/models"]})
    assert models_of(local)[0].is_local
    sglang = container_of({"image": "lmsysorg/sglang:v0.4", "args": ["--model-path", "Qwen/Qwen3-32B"]})
    assert summary(models_of(sglang)) == [("Qwen/Qwen3-32B", None, "sglang")]


def test_nim_image_is_the_model() -> None:
    tagged = container_of({"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"})
    assert summary(models_of(tagged)) == [("nvcr.io/nim/meta/llama-3.1-8b-instruct", "1.8.4", "nim")]
    assert models_of(tagged)[0].pinned
    latest = container_of({"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:latest"})
    assert not models_of(latest)[0].pinned


def test_no_model() -> None:
    assert models_of(container_of({"image": "nginx:1.27", "args": ["--port", "80"]})) == []


def test_models_named_by_serving_crds() -> None:
    from gpupolicy.kube.models import workload_models

    llm = {"spec": {"model": {"uri": "hf://Qwen/Qwen2.5-7B-Instruct"}}}
    [model] = workload_models("LLMInferenceService", llm)
    assert (model.name, model.revision, model.path) == (
        "Qwen/Qwen2.5-7B-Instruct",
        None,
        ("spec", "model", "uri"),
    )
    pinned = {"spec": {"predictor": {"model": {"storageUri": "hf://meta-llama/Llama-2-7b-chat-hf:01c7f73d"}}}}
    [model] = workload_models("InferenceService", pinned)
    assert model.pinned and model.path == ("spec", "predictor", "model", "storageUri")
    serve = """\
applications:
  - args:
      llm_configs:
        - model_loading_config: {model_id: deepseek, model_source: deepseek-ai/DeepSeek-R1}
          engine_kwargs: {tensor_parallel_size: 8}
  - runtime_env:
      env_vars: {MODEL_ID: meta-llama/Meta-Llama-3-8B-Instruct, REVISION: 5f0b02c7}
"""
    found = workload_models("RayService", {"spec": {"serveConfigV2": serve}})
    assert [(m.name, m.pinned) for m in found] == [
        ("deepseek-ai/DeepSeek-R1", False),
        ("meta-llama/Meta-Llama-3-8B-Instruct", True),
    ]
    assert {m.path for m in found} == {("spec", "serveConfigV2")}


def test_a_hostile_serve_config_is_read_within_the_loader_limits() -> None:
    from gpupolicy.kube.models import workload_models

    levels = "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(8)
    )
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + levels + "applications: [*i]\n"
    assert workload_models("RayService", {"spec": {"serveConfigV2": bomb}}) == []
    assert workload_models("RayService", {"spec": {"serveConfigV2": "[" * 100_000}}) == []


@pytest.mark.parametrize(
    ("spec", "nodes"),
    [
        ({"args": ["--model-path", "m", "--nnodes", "2", "--node-rank", "$(POD_INDEX)"]}, 2),
        (
            {
                "command": ["sh", "-c"],
                "args": ["python3 -m sglang.launch_server --tp 16 --nnodes 4 \\\n --node-rank 0"],
            },
            4,
        ),
        ({"command": ["torchrun", "--nnodes=1:8", "--nproc-per-node=8", "serve.py"]}, 8),
        ({"args": ["--nnodes", "$(NODES)"], "env": [{"name": "NODES", "value": "3"}]}, 3),
        ({"args": ["--nnodes", "1"]}, None),
        ({"args": ["--nnodes", "$(UNSET)"]}, None),
        ({"args": ["--tensor-parallel-size", "8"]}, None),
    ],
)
def test_nodes_one_server_spans(spec: dict[str, Any], nodes: int | None) -> None:
    assert nodes_per_instance(container_of({"image": "x:1", **spec})) == nodes


def test_a_client_naming_a_remote_servers_model_serves_none() -> None:
    """rh-aiservices-bu/llm-on-openshift's Gradio RAG app sets MODEL_ID beside INFERENCE_SERVER_URL:
    the model a remote server serves, not one this container loads. MODEL_ID names a served model
    only in a TGI container (its image or its launcher)."""
    from gpupolicy.kube.models import models_of
    from gpupolicy.kube.pod_spec import Container

    env = [
        {"name": "MODEL_ID", "value": "llama2-chat"},
        {"name": "INFERENCE_SERVER_URL", "value": "http://tgi:3000"},
    ]
    client = Container(
        {"name": "server", "image": "quay.io/rh-aiservices-bu/gradio-rag:1.0", "env": env}, (), "container"
    )
    assert models_of(client) == []
    tgi = Container(
        {"name": "tgi", "image": "ghcr.io/huggingface/text-generation-inference:2.4.0", "env": env},
        (),
        "container",
    )
    assert [model.name for model in models_of(tgi)] == ["llama2-chat"]
    launcher = Container(
        {
            "name": "tgi",
            "image": "registry.example.com/llm:1",
            "command": ["text-generation-launcher"],
            "env": env,
        },
        (),
        "container",
    )
    assert [model.server for model in models_of(launcher)] == ["tgi"]


def test_an_all_capitals_model_name_is_a_placeholder_not_a_model() -> None:
    """accelerated-platforms' eval Deployment: `--model V_MODEL_PATH`, a name its pipeline fills in."""
    container = Container(
        {"name": "vllm", "image": "vllm/vllm-openai:v0.8.5", "args": ["--model", "V_MODEL_PATH"]},
        ("spec", "containers", 0),
        "container",
    )
    (model,) = models_of(container)
    assert model.is_unresolved


@pytest.mark.parametrize(
    ("args", "revision"),
    [(["lmdeploy serve api_server internlm/internlm2-chat-7b --server-port 23333"], None),
     (["lmdeploy", "serve", "api_server", "internlm/internlm2-chat-7b", "--revision", "v1.1.0"], "v1.1.0")],
)  # fmt: skip
def test_lmdeploy_serves_its_first_argument(args: list[str], revision: str | None) -> None:
    """InternLM/lmdeploy's k8s/deployment.yaml: `lmdeploy serve api_server MODEL`, which takes
    `--revision` (lmdeploy/cli/serve.py)."""
    container = Container(
        {
            "name": "lmdeploy",
            "image": "openmmlab/lmdeploy:v0.6.0",
            "command": ["/bin/sh", "-c"],
            "args": args,
        },
        ("spec", "containers", 0),
        "container",
    )
    (model,) = models_of(container)
    assert (model.name, model.revision, model.server) == ("internlm/internlm2-chat-7b", revision, "lmdeploy")
