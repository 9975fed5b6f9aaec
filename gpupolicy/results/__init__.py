"""Experiment results: benchmark output in, SLO-bounded goodput per GPU-hour and a verdict out.

`readers` turns a load generator's output (vLLM's serving benchmark, GenAI-Perf, k6, plain
JSONL/CSV) into per-request samples; `slo` reads the objectives; `metrics` computes one run's
figures; `stats` holds the percentile and bootstrap methods; `store` keeps runs in the provenance
database; `verdict` compares arms; `report` and `html` render the result. docs/results.md.
"""
