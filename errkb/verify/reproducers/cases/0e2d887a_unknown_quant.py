"""0e2d887a: a checkpoint quantized with a method this vLLM does not know (fp8), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
neuralmagic/Meta-Llama-3-8B-Instruct-FP8`, fixed by serving an AWQ checkpoint with
`--quantization awq`. Each model folder holds that checkpoint's config.json (no weights):
Llama-3-8B's shape with its quantization_config (quant_method fp8, static activations), and
Llama-2-7B's with AutoAWQ's. Without --quantization, ModelConfig._verify_quantization takes the
method from the checkpoint and raises at the record's own line (config.py:185 in 0.3.3, 184 at
the analysed commit c0c2335c) when create_engine_configs() builds the model config, the
api_server's first start-up step (see _vllm033.py; `--device cuda` stands for the user's GPU host).
"""

from _vllm033 import AWQ_CONFIG, LLAMA2_7B, accepted, engine_configs, write

FP8_MODEL, AWQ_MODEL = "./Meta-Llama-3-8B-Instruct-FP8", "./Llama-2-7B-Chat-AWQ"
# neuralmagic/Meta-Llama-3-8B-Instruct-FP8's config.json: Llama-3-8B with its quantization_config.
LLAMA3_8B = {**LLAMA2_7B, "intermediate_size": 14336, "num_key_value_heads": 8, "vocab_size": 128256,
             "max_position_embeddings": 8192, "rope_theta": 500000.0, "torch_dtype": "bfloat16"}
FP8_CONFIG = {"quant_method": "fp8", "activation_scheme": "static"}
# The record's exampleFix states (errkb.verify.fixstates), mapped: each checkpoint name to its local config.json.
MAPPING = {"values": {"neuralmagic/Meta-Llama-3-8B-Instruct-FP8": FP8_MODEL, "TheBloke/Llama-2-7B-Chat-AWQ": AWQ_MODEL},
           "append": ["--device", "cuda"]}


def setup(state):
    write(FP8_MODEL, LLAMA3_8B, quantization_config=FP8_CONFIG)
    write(AWQ_MODEL, LLAMA2_7B, quantization_config=AWQ_CONFIG)


def trigger(state):
    return accepted(engine_configs(state["argv"]))
