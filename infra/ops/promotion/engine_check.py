"""Load-and-generate check of an artefact, run inside a promotion Job in the model server's own image.

It starts the vLLM engine on the model directory with the engine keywords the server is started with
(infra/serving/engine.py), generates a few tokens greedily on the Job's accelerator, and writes a report. On
Neuron the first run, on the checkpoint, compiles into NEURON_COMPILED_ARTIFACTS (vLLM-Neuron compiles when
it finds no compiled model there); the second run, on the artefact mounted read-only as a server mounts it,
proves it loads without compiling again.

    python3 -c "<this file>" <model dir> <engine keywords, JSON> <report path>

Standard library and vLLM only: it runs in the server image, not in mlinfra's environment.
"""

import json
import sys
import time

PROMPTS = ["The capital of France is", "def fibonacci(n):"]
MAX_TOKENS = 16


def main(argv):
    if len(argv) != 4:
        print("usage: engine_check <model dir> <engine keywords JSON> <report path>", file=sys.stderr)
        return 2
    model, keywords, report_path = argv[1], json.loads(argv[2]), argv[3]
    from vllm import LLM, SamplingParams  # type: ignore[import-not-found]  # in the server image only

    started = time.monotonic()
    llm = LLM(model=model, **keywords)
    loaded = time.monotonic()
    outputs = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0))
    finished = time.monotonic()
    generated = [len(output.outputs[0].token_ids) if output.outputs else 0 for output in outputs]
    report = {
        "model": model,
        "engine": keywords,
        "loadSeconds": round(loaded - started, 1),
        "generatedTokens": generated,
        "tokensPerSecond": round(sum(generated) / max(finished - loaded, 1e-9), 1),
        "sample": outputs[0].outputs[0].text[:200] if outputs and outputs[0].outputs else "",
    }
    with open(report_path, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    if len(generated) != len(PROMPTS) or not all(generated):
        print(f"engine check failed: generated {generated} tokens for {len(PROMPTS)} prompts", file=sys.stderr)
        return 1
    print(f"engine check passed: {sum(generated)} tokens, loaded in {report['loadSeconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
