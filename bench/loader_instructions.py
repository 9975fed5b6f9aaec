"""The loader's stages one at a time, for counting their instructions with callgrind.

Reads every `*.yaml` file of FOLDER (a tree of bench/lint_throughput.py's `generate`), runs the
stage once untimed (imports, first calls), then once inside `exec`, so that callgrind collects that
run alone when told to toggle collection at `exec`:

    valgrind --tool=callgrind --toggle-collect='builtin_exec*' --callgrind-out-file=OUT \
        python bench/loader_instructions.py FOLDER {compose,walk,load,parse}

(`PYTHONHASHSEED=0` for counts that repeat; `PYTHONPATH=CHECKOUT` for another checkout.)
Instructions are what a machine shared with other work still measures exactly: an A/B of a change
to the loader is the difference of two counts. The stages:

- compose: the node graphs of every text (gpupolicy/loading/composer.py), then dropped;
- walk: values and position tables from graphs composed beforehand, with each text's line starts
  (`construct_with_positions`); what it built is kept (its release is not counted);
- load: `load_paths` of the folder, its result kept (as bench/lint_stages.py's load stage);
- parse: PyYAML's `load_all` with `CSafeLoader` over the files (the parse-only of the benches).

This is a benchmark, not a test: it prints nothing and asserts nothing.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

import yaml

from gpupolicy.loading.composer import compose_documents
from gpupolicy.loading.documents import DEFAULT_LIMITS, construct_with_positions, may_share_nodes
from gpupolicy.loading.inputs import load_paths
from gpupolicy.loading.positions import LineStarts

STAGES = ("compose", "walk", "load", "parse")


def main() -> None:
    folder, stage = Path(sys.argv[1]), sys.argv[2]
    if stage not in STAGES:
        raise SystemExit(f"stage: one of {', '.join(STAGES)}")
    files = sorted(folder.glob("*.yaml"))
    texts = [path.read_text(encoding="utf-8") for path in files]

    def compose() -> list[list[yaml.Node]]:
        return [[node for node in compose_documents(text) if node is not None] for text in texts]

    def walk(graphs: list[list[yaml.Node]]) -> list[Any]:
        built: list[Any] = []
        for text, nodes in zip(texts, graphs, strict=True):
            if nodes:
                lines, shared = LineStarts.of(text, nodes[0]), may_share_nodes(text)
                built.extend(
                    construct_with_positions(node, DEFAULT_LIMITS, lines, shared=shared) for node in nodes
                )
        return built

    def parse() -> None:
        for path in files:
            with path.open("rb") as stream:
                for _ in yaml.load_all(stream, Loader=yaml.CSafeLoader):
                    pass

    gc.disable()  # as `gpupolicy lint` runs
    graphs = compose()
    # Untimed: imports and first calls, called directly (callgrind collects inside `exec` only).
    if stage == "walk":
        walk(graphs)
    elif stage == "load":
        load_paths([str(folder)])
    elif stage == "parse":
        parse()
    names: dict[str, Any] = {"compose": compose, "walk": walk, "parse": parse, "load_paths": load_paths}
    names |= {"graphs": graphs if stage == "walk" else None, "folder": folder}
    del graphs
    run = {"compose": "compose()", "walk": "kept = walk(graphs)", "load": "kept = load_paths([str(folder)])"}
    exec(run.get(stage, "parse()"), names)  # the run callgrind collects; what it keeps is not released


if __name__ == "__main__":
    main()
