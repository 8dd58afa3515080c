"""960c65f4: --enable-lora on an AWQ checkpoint (TheBloke/Llama-2-7B-Chat-AWQ), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
TheBloke/Llama-2-7B-Chat-AWQ --enable-lora`, fixed by serving the unquantised
meta-llama/Llama-2-7b-chat-hf. The two model folders hold those checkpoints' config.json
(Llama-2-7B's shape; the AWQ one with its quantization_config, from which ModelConfig takes
quantization='awq'); no weights. The case builds the engine configs as the api_server does
first (see _vllm033.py; `--device cuda` stands for the user's GPU host), then runs the LoRA
checks LLMEngine.__init__ runs first in its _verify_args: LoRAConfig.verify_with_model_config
and verify_with_scheduler_config.
"""

from _vllm033 import AWQ_CONFIG, LLAMA2_7B, accepted, engine_configs, write

AWQ, PLAIN = "./Llama-2-7B-Chat-AWQ", "./Llama-2-7b-chat-hf"
# The record's exampleFix states (errkb.verify.fixstates), mapped: each checkpoint name to its local config.json.
MAPPING = {"values": {"TheBloke/Llama-2-7B-Chat-AWQ": AWQ, "meta-llama/Llama-2-7b-chat-hf": PLAIN},
           "append": ["--device", "cuda"]}


def setup(state):
    write(AWQ, LLAMA2_7B, quantization_config=AWQ_CONFIG)
    write(PLAIN, LLAMA2_7B)


def trigger(state):
    configs = engine_configs(state["argv"])
    model, _cache, _parallel, scheduler, _device, lora = configs
    lora.verify_with_model_config(model)
    lora.verify_with_scheduler_config(scheduler)
    return accepted(configs) + "; LoRAConfig.verify_with_model_config and verify_with_scheduler_config passed"
