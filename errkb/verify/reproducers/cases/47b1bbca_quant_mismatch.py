"""47b1bbca: --quantization awq for a GPTQ checkpoint (TheBloke/Llama-2-7B-Chat-GPTQ), vLLM 0.3.3.

The record's exampleFix: `python -m vllm.entrypoints.openai.api_server --model
TheBloke/Llama-2-7B-Chat-GPTQ --quantization awq`, fixed by dropping the flag. The model folder
holds that checkpoint's config.json (Llama-2-7B's shape with its quantization_config,
quant_method gptq; no weights). 0.3.3's --quantization has argparse choices (awq, gptq,
squeezellm), and awq is one of them, so the CLI reaches this check (the audit's note on the
Python API concerns unlisted methods, as in 0e2d887a): ModelConfig._verify_quantization raises
at the record's own line (config.py:176) when create_engine_configs() builds the model config,
the api_server's first start-up step (see _vllm033.py; `--device cuda` stands for the user's GPU
host). Without the flag the method is taken from the checkpoint (gptq).
"""

from _vllm033 import GPTQ_CONFIG, LLAMA2_7B, accepted, engine_configs, write

MODEL = "./Llama-2-7B-Chat-GPTQ"
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to its local config.json.
MAPPING = {"values": {"TheBloke/Llama-2-7B-Chat-GPTQ": MODEL}, "append": ["--device", "cuda"]}


def setup(state):
    write(MODEL, LLAMA2_7B, quantization_config=GPTQ_CONFIG)


def trigger(state):
    return accepted(engine_configs(state["argv"]))
