"""7bf6c84e: --max-num-batched-tokens 128 below max_num_seqs (default 256), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model facebook/opt-125m
--max-model-len 128 --max-num-batched-tokens 128`, fixed by adding --max-num-seqs 64. The model
folder holds facebook/opt-125m's config.json (no weights). The broken command leaves
--max-num-seqs at 0.3.3's default, 256; SchedulerConfig._verify_args raises at the record's own
line (config.py:480) when create_engine_configs() builds the scheduler config, the api_server's
first start-up step (see _vllm033.py; `--device cuda` stands for the user's GPU host).
"""

from _vllm033 import OPT_125M, accepted, engine_configs, write_config

MODEL = "./opt-125m"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"facebook/opt-125m": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write_config(MODEL, OPT_125M)


def trigger(state):
    configs = engine_configs(state["argv"])
    scheduler = configs[3]
    return accepted(configs) + (f"; max_num_batched_tokens={scheduler.max_num_batched_tokens}, "
                                f"max_num_seqs={scheduler.max_num_seqs}")
