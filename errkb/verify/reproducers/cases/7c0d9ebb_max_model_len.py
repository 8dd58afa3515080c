"""7c0d9ebb: --max-model-len 8192 on Llama-2-7b-chat-hf (4096 positions), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
meta-llama/Llama-2-7b-chat-hf --max-model-len 8192`, fixed with 4096. The model folder holds
Llama-2-7b-chat-hf's config.json (max_position_embeddings 4096, no rope_scaling; no weights).
ModelConfig's _get_and_verify_max_len raises in create_engine_configs(), as the api_server's
engine start-up does first (see _vllm033.py; `--device cuda` stands for the user's GPU host).
At this release the message prints the value of the last key the loop tried (seq_len, None),
not the key that set the limit: "(None=4096 in model's config.json)".
"""

from _vllm033 import LLAMA2_7B, accepted, engine_configs, write

MODEL = "./Llama-2-7b-chat-hf"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"meta-llama/Llama-2-7b-chat-hf": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write(MODEL, LLAMA2_7B)


def trigger(state):
    return accepted(engine_configs(state["argv"]))
