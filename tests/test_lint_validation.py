"""W501/W502: validation code that cannot tell a broken setup from a fixed one, found without running it.

The shapes are the always-true validations an audit of the bundled data found (values written into
the code and then asserted), and the rewritten ones that read the user's flags."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.records.lint import lint_record, validation_reads_setup

ALWAYS_TRUE = {  # as first ingested, before the audit
    "c1f5104f": "gpu_memory_utilization = 0.9\nassert 0 < gpu_memory_utilization <= 1.0, 'a fraction'\n",
    "7bf6c84e": "max_num_batched_tokens, max_num_seqs = 128, 64\nassert max_num_batched_tokens >= max_num_seqs\n",
    "c7098e29": ("import torch\nq = torch.empty(4, 32, 128, dtype=torch.bfloat16)\nq_data_type = torch.bfloat16\n"
                 "assert q.dtype == q_data_type\n"),
    "dd0a1508": ("from urllib.parse import urlparse\ninit_method = 'tcp://127.0.0.1:29500'\n"
                 "assert urlparse(init_method).scheme in ('env', 'tcp', 'file')\n"),
    "engine": "from vllm import LLM\nllm = LLM(model='Qwen/Qwen3-0.6B', gpu_memory_utilization=0.9)\nassert llm.llm_engine\n",
}
READS_SETUP = {
    "argparse": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--tp', type=int)\nassert p.parse_known_args()[0].tp\n",
    "sys.argv": "import sys\nassert '--local-sync' in sys.argv[1:]\n",
    "environment": "import os\nassert os.environ.get('NCCL_P2P_DISABLE') != '1'\n",
    "from os import getenv": "from os import getenv\nassert getenv('VLLM_USE_V1') == '1'\n",
    "file": "cfg = open('config.json').read()\nassert 'bfloat16' not in cfg\n",
    "device": "import torch\nassert torch.cuda.get_device_capability(0) >= (8, 0)\n",
    "library": "import torch.distributed as dist\nassert dist.is_nccl_available()\n",
    "host": "import psutil\nassert psutil.virtual_memory().total > 64 << 30\n",
}


@pytest.mark.parametrize("name", sorted(ALWAYS_TRUE))
def test_values_written_into_the_code_are_not_the_users_setup(name):
    assert validation_reads_setup(ALWAYS_TRUE[name]) is False


@pytest.mark.parametrize("name", sorted(READS_SETUP))
def test_arguments_environment_files_and_queries_are(name):
    assert validation_reads_setup(READS_SETUP[name]) is True


def test_not_python_and_hostile_code_get_a_reason_never_an_exception():
    assert validation_reads_setup("vllm serve --tp 8\n") == "line 1: invalid syntax"
    assert validation_reads_setup("x = 1\0\n") == "source code string cannot contain null bytes"
    assert validation_reads_setup("(" * 300 + ")" * 300).startswith("line 1: too many nested parentheses")
    assert validation_reads_setup("x" * (16 * 1024 + 1)) is None  # not analysed


def test_code_too_long_to_analyse_is_said(seed_record):
    record = {**seed_record, "validationCode": "import sys\n" + "x = 1\n" * 4000}
    (finding,) = [f for f in lint_record(record) if f.code.startswith("W5")]
    assert finding.code == "W503"
    assert finding.message == "validationCode is 23 KiB, over the 16 KiB errkb analyses: not checked"


def test_the_findings_name_the_record_and_say_why(seed_record, tmp_path):
    record = {**seed_record, "validationCode": ALWAYS_TRUE["c1f5104f"]}
    (finding,) = [f for f in lint_record(record) if f.code.startswith("W5")]
    assert finding.code == "W501" and finding.record_id == seed_record["id"]
    assert "the values it judges are written into it" in finding.message
    draft = {**record, "tags": ["draft"]}
    assert [f for f in lint_record(draft) if f.code.startswith("W5")] == []  # a draft is not judged yet
    path = tmp_path / "r.json"
    path.write_text(json.dumps({**seed_record, "validationCode": "vllm serve --tp 8"}))
    result = CliRunner().invoke(cli, ["lint", str(path)])
    assert result.exit_code == 0  # warnings only
    assert f"{path}:1:1: W502 validation-not-python [{seed_record['id']}] validationCode is not Python: line 1: invalid syntax" \
        in result.output
