"""errkb check-source: env vars, CLI flags and message literals checked against a real source tree."""

import json
import subprocess
import sys
from pathlib import Path

from errkb.mine.source_check import check_records

SOURCE = '''\
import os

ENV = os.environ.get("VLLM_USE_V1", "1")


class CacheConfig:
    max_model_len: int = 0


def check(requested, total):
    if requested > total:
        raise ValueError(f"requested {requested / 2**30:.2f} GiB but only {total:.1f} GiB free")
'''


def _tree(tmp_path):
    pkg = tmp_path / "src" / "proj"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cfg.py").write_text(SOURCE)
    return tmp_path / "src"


def _record(**kw):
    rec = {
        "id": "r1",
        "repo": "vllm-project/vllm",
        "errorMessage": "requested 16.00 GiB but only 12.0 GiB free",
        "filePath": "proj/cfg.py",
        "lineNumber": 12,
        "solutions": ["Set VLLM_USE_V1=0", "Lower --max-model-len"],
        "exampleFix": "export VLLM_NO_SUCH_VAR=1\nvllm serve m --no-such-flag",
    }
    rec.update(kw)
    return rec


def test_findings_exact(tmp_path):
    findings = [str(f) for f in check_records([_record()], _tree(tmp_path))]
    assert findings == [
        "S401 env-var-not-in-source [r1] VLLM_NO_SUCH_VAR is named in the fix but no .py file of the source mentions it",
        "S402 cli-flag-not-in-source [r1] --no-such-flag is named in the fix but the source has neither '--no-such-flag' "
        "nor a field no_such_flag",
    ]


def test_other_projects_env_vars_are_not_checked(tmp_path):
    rec = _record(repo="pytorch/pytorch", exampleFix="export VLLM_NO_SUCH_VAR=1 NCCL_DEBUG=INFO TORCH_NO_SUCH=1")
    assert [str(f) for f in check_records([rec], _tree(tmp_path))] == [
        "S401 env-var-not-in-source [r1] TORCH_NO_SUCH is named in the fix but no .py file of the source mentions it"
    ]


def test_fixed_precision_literal(tmp_path):
    rec = _record(errorMessage="requested 16.00 GiB but only 12.00 GiB free", solutions=[], exampleFix="")
    findings = [str(f) for f in check_records([rec], _tree(tmp_path))]
    assert findings == [
        "S403 message-literal-not-producible [r1] errorMessage has '12.00' after 'GiB but only' but proj/cfg.py:12 "
        "formats {total:.1f} with 1 decimal(s)"
    ]


def test_moved_raise_is_found_by_its_message(tmp_path):
    rec = _record(lineNumber=3, errorMessage="requested 16.00 GiB but only 12.00 GiB free", solutions=[], exampleFix="")
    assert [f.code for f in check_records([rec], _tree(tmp_path))] == ["S403"]


def test_a_file_path_outside_the_source_tree_is_never_read(tmp_path):
    """filePath is the record's, untrusted: "../outside/cfg.py" or an absolute path made
    check-source read (and quote from) a file outside the tree it was given."""
    tree = _tree(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "cfg.py").write_text(SOURCE)
    literal = dict(errorMessage="requested 16.00 GiB but only 12.00 GiB free", solutions=[], exampleFix="")
    assert [f.code for f in check_records([_record(**literal)], tree)] == ["S403"]  # read inside the tree
    for path in ("../outside/cfg.py", "proj/../../outside/cfg.py", str(tmp_path / "outside" / "cfg.py")):
        assert check_records([_record(filePath=path, **literal)], tree) == [], path


def test_clean_record_has_no_findings(tmp_path):
    rec = _record(exampleFix="vllm serve m --max-model-len 4096")
    assert check_records([rec], _tree(tmp_path)) == []


def _cli(*args):
    return subprocess.run([str(Path(sys.executable).parent / "errkb"), *args], capture_output=True, text=True)


def test_cli_json_and_exit(tmp_path):
    recs = tmp_path / "r.json"
    recs.write_text(json.dumps(_record()))
    done = _cli("check-source", str(_tree(tmp_path)), str(recs), "--json")
    assert done.returncode == 1
    assert [f["code"] for f in json.loads(done.stdout)] == ["S401", "S402"]


def test_cli_missing_source(tmp_path):
    recs = tmp_path / "r.json"
    recs.write_text(json.dumps(_record()))
    done = _cli("check-source", str(tmp_path / "nope"), str(recs))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == f"Error: {tmp_path / 'nope'}: cannot read source: {tmp_path / 'nope'}: no such file or folder"
