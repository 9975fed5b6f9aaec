"""Generate the worked example's benchmark results (docs/results.md): vLLM serving-benchmark
result files, as `vllm bench serve --save-result --save-detailed` writes them, for the day-29
experiment of the field notes — a control arm (`--max-num-seqs 64`) and a treatment arm that
lets the server batch more (`--max-num-seqs 256`), three repeats each, 200 requests a run.

The data are generated, not measured, but shaped like a real run on one A100: log-normal
time to first token that grows with the batch, inter-token gaps around a per-request decode
speed, a few failed requests. Deterministic: each run has its own seeded random.Random, so
running this again writes the same files.

    python examples/results/generate.py [FOLDER]   # writes FOLDER (default examples/results/day29)/*.json
"""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REQUESTS = 200
# vLLM's --burstiness: request gaps follow a gamma distribution of this shape (1 is Poisson).
BURSTINESS = 4.0
ARMS = {
    # arm: (requests per second served, TTFT median s, TTFT sigma, TPOT median s, error share, label)
    "control": (2.4, 0.30, 0.45, 0.034, 0.004, "max-num-seqs-64"),
    "max-num-seqs-256": (3.3, 0.50, 0.50, 0.042, 0.010, "max-num-seqs-256"),
}


def one_run(arm: str, repeat: int) -> dict[str, object]:
    rate, ttft_median, ttft_sigma, tpot_median, error_share, label = ARMS[arm]
    rng = random.Random(f"day29/{arm}/{repeat}")
    clock = 1000.0 + rng.random() * 100  # time.perf_counter() of the benchmark process
    starts, ttfts, itls, input_lens, output_lens, errors = [], [], [], [], [], []
    for _ in range(REQUESTS):
        clock += rng.gammavariate(BURSTINESS, 1 / (rate * BURSTINESS))
        prompt = int(rng.uniform(180, 900))
        starts.append(round(clock, 6))
        input_lens.append(prompt)
        if rng.random() < error_share:
            ttfts.append(0.0)
            itls.append([])
            output_lens.append(0)
            errors.append("Response ended prematurely: ClientPayloadError")
            continue
        ttft = ttft_median * math.exp(rng.gauss(0, ttft_sigma)) * (0.8 + prompt / 2000)
        speed = tpot_median * math.exp(rng.gauss(0, 0.18))
        count = max(2, int(rng.gauss(60, 18)))
        gaps = [round(max(0.004, rng.gauss(speed, speed * 0.25)), 4) for _ in range(count - 1)]
        ttfts.append(round(ttft, 5))
        itls.append(gaps)
        output_lens.append(count)
        errors.append("")
    ends = [s + t + sum(g) for s, t, g, e in zip(starts, ttfts, itls, errors, strict=True) if not e]
    duration = round(max(ends) - starts[0], 6)
    completed = sum(1 for error in errors if not error)
    return {
        "date": f"20261129-{9 + repeat:02d}{'15' if arm == 'control' else '45'}00",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": label,
        "model_id": "Qwen/Qwen2.5-7B-Instruct",
        "tokenizer_id": "Qwen/Qwen2.5-7B-Instruct",
        "num_prompts": REQUESTS,
        "request_rate": rate,
        "burstiness": BURSTINESS,
        "max_concurrency": 32,
        "duration": duration,
        "completed": completed,
        "failed": REQUESTS - completed,
        "total_input_tokens": sum(n for n, e in zip(input_lens, errors, strict=True) if not e),
        "total_output_tokens": sum(output_lens),
        "request_throughput": completed / duration,
        "request_goodput": None,
        "output_throughput": sum(output_lens) / duration,
        "total_token_throughput": (sum(input_lens) + sum(output_lens)) / duration,
        "input_lens": input_lens,
        "output_lens": output_lens,
        "start_times": starts,
        "ttfts": ttfts,
        "itls": itls,
        "generated_texts": ["" for _ in range(REQUESTS)],
        "errors": errors,
    }


def main() -> None:
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "day29"
    folder.mkdir(exist_ok=True)
    for arm in ARMS:
        for repeat in (1, 2, 3):
            path = folder / f"{arm}-{repeat}.json"
            path.write_text(json.dumps(one_run(arm, repeat)) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
