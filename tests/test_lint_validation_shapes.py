"""W501 on the shapes real validation code takes: a check of the installed library's version, an
install probe, a path or tool on the host reads the setup; a hub checkpoint named in the code
(the audit's 47b1bbca and the first 960c65f4) or JSON parsed from a literal does not."""

from __future__ import annotations

import pytest

from errkb.records.lint import validation_reads_setup

READS_SETUP = {
    "library version": "import vllm\nfrom packaging.version import Version\nassert Version(vllm.__version__) >= Version('0.6.0')\n",
    "torch.version.cuda": "import torch\nassert torch.version.cuda is not None, 'a CPU-only torch'\n",
    "installed version": "from importlib.metadata import version\nassert version('flashinfer-python') >= '0.2'\n",
    "install probe": "try:\n    import flash_attn  # noqa\nexcept ImportError:\n    raise AssertionError('pip install flash-attn')\n",
    "device file": "import os\nassert os.path.exists('/dev/nvidia0')\n",
    "Path.open": "from pathlib import Path\nwith Path('config.json').open() as f:\n    assert 'awq' not in f.read()\n",
    "tool on PATH": "import shutil\nassert shutil.which('nvcc'), 'no CUDA toolkit'\n",
    "bf16 support": "import torch\nassert torch.cuda.is_bf16_supported()\n",
    "aliased os": "import os as o\nassert o.environ.get('NCCL_P2P_DISABLE') != '1'\n",
    "python version": "import sys\nassert sys.version_info >= (3, 9)\n",
    "user's checkpoint": "import sys\nfrom transformers import AutoConfig\nassert AutoConfig.from_pretrained(sys.argv[1])\n",
}
CONSTANTS = {
    # 47b1bbca as first ingested: the checkpoint is named in the code, so the answer is the same for every user.
    "47b1bbca": ("from transformers import AutoConfig\nrequested = None\n"
                 "config = AutoConfig.from_pretrained('TheBloke/Llama-2-7B-Chat-GPTQ')\n"
                 "method = str(config.quantization_config['quant_method']).lower()\nassert requested in (None, method)\n"),
    "960c65f4": ("from transformers import AutoConfig\nconfig = AutoConfig.from_pretrained('meta-llama/Llama-2-7b-chat-hf')\n"
                 "assert getattr(config, 'quantization_config', None) is None\n"),
    "json literal": "import json\ncfg = json.loads('{\"tensor_parallel_size\": 8}')\nassert 64 % cfg['tensor_parallel_size'] == 0\n",
}


@pytest.mark.parametrize("name", sorted(READS_SETUP))
def test_library_host_and_file_queries_read_the_setup(name):
    assert validation_reads_setup(READS_SETUP[name]) is True


@pytest.mark.parametrize("name", sorted(CONSTANTS))
def test_a_checkpoint_or_json_written_into_the_code_is_not_the_users_setup(name):
    assert validation_reads_setup(CONSTANTS[name]) is False


@pytest.mark.parametrize("code", ["-" * 16000 + "1", "a" + ".a" * 8000, "+".join(["1"] * 8000)])  # under MAX_VALIDATION_CODE
def test_code_too_deep_for_pythons_parser_is_named_so(code):
    assert validation_reads_setup(code) == "nested too deeply for Python's parser"
