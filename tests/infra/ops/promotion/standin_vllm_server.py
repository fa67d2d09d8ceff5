"""A stand-in for `vllm serve` on the CPU, for the tests of lm_tasks.py's served path (vLLM itself needs an
accelerator): the part of vLLM's OpenAI-compatible server that lm-eval's `local-completions` client uses, answered by
the tiny model through transformers.

    standin_vllm_server.py serve MODEL --served-model-name NAME --host HOST --port PORT [engine flags...]

GET /health answers 200 once the model is loaded. POST /v1/completions takes `prompt` as token ids (a list, or a
list of lists, as lm-eval sends them with tokenized requests); with `echo` and `logprobs` it returns the prompt's
tokens and then `max_tokens` greedy ones, each with its log-probability (None for the first) and the top one's, as
vLLM's completions do; without, the greedy continuation cut at the first `stop` string. Every request and the
engine flags it was started with are appended to $STANDIN_LOG. $STANDIN_FAIL makes it exit 1 before it listens.
"""

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import transformers


def main(argv):
    if argv[1:2] != ["serve"]:
        print("usage: vllm serve MODEL ...", file=sys.stderr)
        return 2
    model_dir, rest = argv[2], argv[3:]
    options = dict(zip(rest[::2], rest[1::2], strict=False))
    if os.environ.get("STANDIN_FAIL"):
        print("RuntimeError: CUDA out of memory (stand-in)", file=sys.stderr)
        return 1
    name, port = options["--served-model-name"], int(options["--port"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    log = os.environ.get("STANDIN_LOG")

    def record(entry):
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry) + "\n")

    record({"started": rest})

    @torch.no_grad()
    def logprobs_of(ids):
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)

    def complete(ids, body):
        tokens, logprobs, top = list(ids), [None], [None]
        if body.get("echo"):
            table = logprobs_of(ids)
            for i in range(1, len(ids)):
                logprobs.append(table[i - 1, ids[i]].item())
                best = int(table[i - 1].argmax())
                top.append({tokenizer.decode([best]): table[i - 1, best].item()})
        generated = []
        for _ in range(int(body.get("max_tokens", 16))):
            table = logprobs_of(tokens)
            best = int(table[-1].argmax())
            tokens.append(best)
            generated.append(best)
            logprobs.append(table[-1, best].item())
            top.append({tokenizer.decode([best]): table[-1, best].item()})
            text = tokenizer.decode(generated)
            if any(stop and stop in text for stop in body.get("stop") or []):
                break
        text = tokenizer.decode(generated)
        for stop in body.get("stop") or []:
            if stop and stop in text:
                text = text[: text.index(stop)]
        choice = {"text": text, "finish_reason": "stop"}
        if body.get("echo") and body.get("logprobs"):
            choice["logprobs"] = {"tokens": [tokenizer.decode([t]) for t in tokens], "token_logprobs": logprobs,
                                  "top_logprobs": top}  # fmt: skip
        return choice

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._send(200, {}) if self.path == "/health" else self._send(404, {"error": {"message": self.path}})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path != "/v1/completions" or body.get("model") != name:
                self._send(404, {"error": {"message": f"no model {body.get('model')!r} at {self.path}"}})
                return
            prompts = body["prompt"]
            prompts = [prompts] if prompts and isinstance(prompts[0], int) else prompts
            record({"request": {k: v for k, v in body.items() if k != "prompt"}, "prompts": len(prompts)})
            choices = [{**complete(ids, body), "index": i} for i, ids in enumerate(prompts)]
            self._send(200, {"id": "cmpl-standin", "object": "text_completion", "model": name, "choices": choices})

    ThreadingHTTPServer((options.get("--host", "127.0.0.1"), port), Handler).serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
