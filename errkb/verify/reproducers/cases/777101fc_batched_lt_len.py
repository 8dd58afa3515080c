"""777101fc: --max-num-batched-tokens 4096 below --max-model-len 8192 (Mistral-7B-v0.1), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
mistralai/Mistral-7B-v0.1 --max-model-len 8192 --max-num-batched-tokens 4096`, fixed with
--max-num-batched-tokens 8192. The model folder holds Mistral-7B-v0.1's config.json (32768
positions, sliding window 4096; no weights). 0.3.3 has no chunked prefill (no such flag), so a
whole prompt must fit one batch: SchedulerConfig._verify_args raises at the record's own line
(config.py:472) when create_engine_configs() builds the scheduler config, the api_server's
first start-up step (see _vllm033.py; `--device cuda` stands for the user's GPU host).
"""

from _vllm033 import MISTRAL_7B, accepted, engine_configs, write_config

MODEL = "./Mistral-7B-v0.1"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"mistralai/Mistral-7B-v0.1": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write_config(MODEL, MISTRAL_7B)


def trigger(state):
    configs = engine_configs(state["argv"])
    return accepted(configs) + f"; max_num_batched_tokens={configs[3].max_num_batched_tokens}"
