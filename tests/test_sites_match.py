"""The site tier's reader: trusted patterns only, linear matching, every site of a
message listed, releases and commit links, the CUDA runtime table, a clear error on a
broken index."""

from __future__ import annotations

import gzip
import json
import re
import time

import pytest

from errkb.match.sites import Site, SiteIndex, SiteIndexError, chunks_of, trust
from errkb.mine.releases import Part
from errkb.mine.site_index import SiteIndexData
from errkb.mine.templates import Template
from errkb.resources import data_dir

MAX_TOKENS = r"max_tokens must be at least 1, got (.+?)\."


def _index(tmp_path):
    data = SiteIndexData()
    rows_old = [
        {"p": MAX_TOKENS, "f": "vllm/sampling_params.py", "n": 200, "fn": "SamplingParams._verify_args",
         "c": "self.max_tokens < 1", "k": "raise", "e": "ValueError"},
    ]
    rows_new = rows_old[:1] + [
        {"p": MAX_TOKENS, "f": "vllm/entrypoints/openai/protocol.py", "n": 50, "fn": "Request.check", "c": None,
         "k": "raise", "e": "ValueError"},
        {"p": "Invalid value (.+?)", "f": "vllm/x.py", "n": 3, "fn": "f", "c": None, "k": "raise", "e": "ValueError"},
        {"p": "The model configuration is not supported by this particular backend", "f": "vllm/y.py",
         "n": 9, "fn": "g", "c": None, "k": "log", "e": "WARNING"},
    ]
    for version, rows, commit in (("0.2.7", rows_old, None), ("0.6.3", rows_new, "a" * 40)):
        part = Part("vllm", version, commit)
        part.rows = [dict(r) for r in rows]
        data.add(part)
    path = tmp_path / "sites" / "sites.jsonl.gz"
    data.write(path)
    return SiteIndex.load(path, cache=tmp_path / "cache")


def test_match_lists_every_site_with_releases_and_link(tmp_path):
    index = _index(tmp_path)
    matches = index.match("Traceback ...\nValueError: max_tokens must be at least 1, got 0.\n")
    assert len(matches) == 1
    m = matches[0]
    assert (m.line_number, m.trust, m.pattern) == (2, "strong", MAX_TOKENS)
    sites = {s.file: s for s in m.sites}
    assert set(sites) == {"vllm/sampling_params.py", "vllm/entrypoints/openai/protocol.py"}
    s = sites["vllm/sampling_params.py"]
    assert s.releases == "0.2.7-0.6.3" and s.release == "0.6.3" and s.commit == "a" * 40
    assert s.describe() == ("raised at vllm/sampling_params.py:200 in SamplingParams._verify_args when "
                            "self.max_tokens < 1; seen in vllm 0.2.7-0.6.3")
    assert s.source_url() == f"https://github.com/vllm-project/vllm/blob/{'a' * 40}/vllm/sampling_params.py#L200"
    assert m.as_dict()["tier"] == "site"
    short = Site(*[{"commit": "9da56fd18", "release": "0.21.0"}.get(n, getattr(s, n)) for n in Site.__slots__])
    assert short.source_url() == "https://github.com/vllm-project/vllm/blob/9da56fd18/vllm/sampling_params.py#L200"


def test_trust_rule():
    assert trust(MAX_TOKENS)[0] == "strong"  # max_tokens is a rare token
    assert trust("Invalid value (.+?)")[0] is None  # under 20 literal letters/digits
    assert trust("The model configuration is not supported by this particular backend")[0] == "half"
    # prose without a rare token: scipy raises "deg must be a positive integer" too
    assert trust("(.+?) must be a positive integer")[0] is None  # a leading wildcard
    assert trust("array must be at least 2-d or more")[0] is None  # under 30 letters/digits
    assert trust("module (.+?) has no attribute (.+?)")[0] is None  # Python's own message
    assert trust("(.+?)" + "a" * 30 + "(.+?)")[0] is None  # no whole word to anchor on
    # a long sentence is specific on any line (c10d's, pasted behind a long log prefix)
    assert trust(r"Failed to recv, got 0 bytes\. Connection was likely closed\. "
                 r"Did the remote server shutdown or crash\?")[0] == "strong"


def test_half_rule_needs_half_the_line(tmp_path):
    index = _index(tmp_path)
    line = "WARNING The model configuration is not supported by this particular backend"
    assert [m.trust for m in index.match(line)] == ["half"]
    long_line = "some unrelated text comes first here " * 4 + line
    assert index.match(long_line) == []
    # a log line's header is not text the message could be lost in: half of the message
    for header in ("(EngineCore_DP0 pid=1511501) ERROR 12-15 18:57:10 [core.py:918] ",
                   "WARNING 01-10 21:49:05 model_runner_base.py:143] ", "Aug 16 03:07:54 gpu-node-7 python[61178]: "):
        assert [m.trust for m in index.match(header + line)] == ["half"], header
        assert [m and m.trust for m in index.match_lines([header + line])] == ["half"], header
        assert index.match(header + long_line) == [], header
    assert index.match("ValueError: Invalid value 3") == []  # untrusted: never served


def test_chunks_of_round_trips_the_miners_patterns():
    t = Template.of(["a.b (c) [d]\n\t", Template.of([]).parts and "" or "x", "\x01 end"])
    assert "".join(c for c in chunks_of(t.pattern()) if c) == t.literal
    with pytest.raises(ValueError):
        chunks_of("a.*b")


def test_cuda_table(tmp_path):
    index = _index(tmp_path)
    (m,) = index.match("RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be ...")
    assert m.trust == "cuda" and "index out of range" in m.meaning
    assert index.match("device-side assert triggered") == []  # only on a line naming CUDA


def test_nccl_table_from_the_bundled_data(tmp_path):
    index = _index(tmp_path)
    paste = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
             "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1\n"
             "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")
    tables = [m for m in index.match(paste) if m.meaning]
    # the message on line 1, its code (ncclSystemError) on line 2: explain shows the entry once
    assert [(m.trust, m.pattern, m.line_number) for m in tables] == [("nccl", "unhandled system error", 1),
                                                                     ("nccl", "unhandled system error", 2)]
    assert "NCCL_SOCKET_IFNAME" in tables[0].meaning and tables[0].describe()[0].startswith("NCCL error (line 1)")
    # the generic strings only on a line naming NCCL
    assert not [m for m in index.match("ValueError: internal error in my parser") if m.meaning]
    invalid = [m.pattern for m in index.match("RuntimeError: NCCL error: invalid usage") if m.meaning]
    assert invalid == ["invalid usage"]


def test_cuda_and_nccl_codes_and_cudas_own_sentences(tmp_path):
    """A table entry is found by its code too (PyTorch prints "Search for `cudaError...'", NCCL
    "ncclSystemError: ..."), as a whole word; CUDA's own long sentences are found where another
    library embeds them without naming CUDA (FlashInfer's "RMSNorm failed with error code ...")."""
    index = _index(tmp_path)

    def tables(text):
        return [(m.trust, m.pattern) for m in index.match(text) if m.meaning]

    assert tables("ERROR [multiproc_executor.py:962] Search for `cudaErrorStreamCaptureUnsupported' in "
                  "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.") == [
        ("cuda", "operation not permitted when stream is capturing")]
    assert tables("ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.") == [
        ("nccl", "unhandled system error")]
    # a code is a whole word: cudaErrorInvalidDevice is not inside cudaErrorInvalidDeviceFunction
    assert tables("Search for `cudaErrorInvalidDeviceFunction' in the docs") == [("cuda", "invalid device function")]
    assert tables("RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device") == [
        ("cuda", "no kernel image is available for execution on the device")]
    # the short, generic strings need PyTorch's "CUDA error" (or the code), not a "cuda" anywhere
    assert tables("ValueError: invalid argument for --foo") == []
    assert tables("ValueError: invalid argument 'device': expected cpu or cuda") == []
    assert tables("KeyError: unknown error_code for device cuda:0") == []
    assert tables("RuntimeError: CUDA error: invalid argument") == [("cuda", "invalid argument")]
    assert tables("UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Error 802: "
                  "system not yet initialized") == [("cuda", "system not yet initialized")]
    # ROCm reuses CUDA's strings: a HIP error is not CUDA's (its advice would be wrong there)
    assert tables("RuntimeError: HIP error: an illegal memory access was encountered") == []
    assert tables("RuntimeError: HIP error: no kernel image is available for execution on the device") == []
    # CUDA and NCCL both have "invalid argument": each table's line gets its own meaning
    both = [m for m in index.match("RuntimeError: CUDA error: invalid argument\n"
                                   "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, invalid argument")
            if m.meaning]
    assert [(m.trust, m.line_number) for m in both] == [("cuda", 1), ("nccl", 2)]
    # the batch path (enrich) finds the same entries by the same strings
    lines = ["Search for `cudaErrorStreamCaptureUnsupported' in https://docs.nvidia.com/cuda/",
             "ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
             "Search for `cudaErrorInvalidDeviceFunction' in the docs",
             "ValueError: invalid argument for --foo",
             "RuntimeError: CUDA error: invalid argument",
             "NCCL error in: x.cpp:1, invalid argument"]
    assert [m and (m.trust, m.pattern) for m in index.match_lines(lines)] == [
        ("cuda", "operation not permitted when stream is capturing"), ("nccl", "unhandled system error"),
        ("cuda", "invalid device function"), None, ("cuda", "invalid argument"), ("nccl", "invalid argument")]


# torchrun's summary as a user pastes it (torch 2.x, a worker killed by the OOM killer)
CHILD_FAILED = """\
  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py", line 263, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-01_10:12:33
  host      : node1
  rank      : 0 (local_rank: 0)
  exitcode  : -9 (pid: 12345)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 12345
============================================================""".replace(":\n=", ": \n=")  # torch prints "Error: " + "\n..."


def test_torchrun_failure_table_says_what_the_summary_and_its_signal_mean(tmp_path):
    index = _index(tmp_path)
    tables = [(m.trust, m.pattern, m.line_number) for m in index.match(CHILD_FAILED) if m.meaning]
    # one answer per line that holds one (the traceback's `raise ChildFailedError(` line too)
    assert ("elastic", "ChildFailedError", 3) in tables
    assert ("elastic", "Signal 9 (SIGKILL) received by PID", 17) in tables
    meaning = {m.pattern: m for m in index.match(CHILD_FAILED) if m.meaning}
    assert "Root Cause" in meaning["ChildFailedError"].meaning
    assert "OOM killer" in meaning["Signal 9 (SIGKILL) received by PID"].meaning
    assert meaning["ChildFailedError"].describe()[0].startswith("torchrun worker failure (line")
    # a worker that exited non-zero without an error file
    plain = index.match("  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html")
    assert [m.trust for m in plain] == ["elastic"] and "@record" in plain[0].meaning
    # other programs' crash reports are not torchrun's: folly's and glog's signal lines
    assert not index.match("*** Signal 11 (SIGSEGV) (0x0) received by PID 4242 (TID 0x7f), stack trace: ***")
    assert not index.match("*** SIGSEGV (@0x0) received by PID 17711 (TID 0x7f893090a6f0) from PID 0; stack trace: ***")


def test_torchrun_failure_table_tags_log_lines_in_the_batch_path(tmp_path):
    index = _index(tmp_path)
    lines = CHILD_FAILED.split("\n")
    batch = index.match_lines(lines)
    tagged = {n + 1: m.pattern for n, m in enumerate(batch) if m is not None}
    assert tagged == {2: "ChildFailedError", 3: "ChildFailedError", 17: "Signal 9 (SIGKILL) received by PID"}


# PyTorch's most pasted C++ errors, as users pasted them (the PyTorch table, data/sites/torch_errors.json)
TORCH_CPP = {
    "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, "
    "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.":
        "Watchdog caught collective operation timeout",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!":
        "Expected all tensors to be on the same device",
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: "
    "29500, useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use":
        "The server socket has failed to listen on any local network address",
    "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`":
        "CUDA error: CUBLAS_STATUS_",
    "RuntimeError: The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1":
        ") must match the size of tensor b (",
    "IndexError: index out of range in self": "index out of range in self",
    # its CUDA kernels' device-side assertions (CUDA_KERNEL_ASSERT: the condition, stringified)
    "/opt/conda/conda-bld/pytorch_1695392020201/work/aten/src/ATen/native/cuda/Indexing.cu:1292: indexSelectLargeIndex: "
    "block: [222,0,0], thread: [96,0,0] Assertion `srcIndex < srcSelectDimSize` failed.": "srcIndex < srcSelectDimSize",
    "/opt/conda/conda-bld/pytorch_1678411187366/work/aten/src/ATen/native/cuda/Loss.cu:240: "
    "nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` "
    "failed.": "t >= 0 && t < n_classes",
    "../aten/src/ATen/native/cuda/Loss.cu:92: operator(): block: [79,0,0], thread: [118,0,0] Assertion "
    "`input_val >= zero && input_val <= one` failed.": "input_val >= zero && input_val <= one",
    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:94: operator(): block: [0,0,0], thread: [91,0,0] Assertion "
    '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.': 'index < sizes[i] && "index out of bounds"',
    "/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: [0,0,0] "
    'Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.':
        'idx_dim < index_size && "index out of bounds"',
    # ProcessGroupNCCL's warnings, printed beside (or instead of) the real error
    "[rank0]:[W407 10:13:23.082579832 ProcessGroupNCCL.cpp:1553] Warning: WARNING: destroy_process_group() was not "
    "called before program exit, which can leak resources. For more info, please see "
    "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())":
        "destroy_process_group() was not called before program exit",
    "[rank7]:[W602 06:53:34.153230800 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 7]  using GPU 7 to perform "
    "barrier as devices used by this process are currently unknown. This can potentially cause a hang if this rank to "
    "GPU mapping is incorrect.": "to perform barrier as devices used by this process are currently unknown",
}


@pytest.mark.parametrize("paste", TORCH_CPP)
def test_pytorch_errors_raised_in_its_cpp_get_what_they_mean_first(tmp_path, paste):
    """No wheel ships PyTorch's .cpp, so these are not mined: the curated PyTorch table says what
    each means and where it is raised, before any mined site of the same line (a copy of the
    wording elsewhere, as torch's own Python shape functions' "The size of tensor a")."""
    index = _index(tmp_path)
    (first, *rest) = index.match(paste)
    assert (first.trust, first.pattern) == ("torch", TORCH_CPP[paste])
    assert re.search(r"\((raised|logged) (in|by) ", first.meaning)  # says where PyTorch raises it
    assert first.describe()[0].startswith("PyTorch error (C++) (line 1)")
    assert all(m.trust != "torch" for m in rest)
    (batch,) = index.match_lines([paste])  # enrich's path tags the line with the same entry
    assert (batch.trust, batch.pattern) == ("torch", TORCH_CPP[paste])


def test_every_pytorch_table_entry_names_the_source_file_it_is_raised_in():
    table = json.loads((data_dir() / "sites" / "torch_errors.json").read_text(encoding="utf-8"))["errors"]
    assert len(table) >= 20
    for entry in table:
        assert re.search(r"\b(aten/src/ATen|torch/csrc|c10)/[\w/]+\.(cpp|h|cu)\b", entry["meaning"]), entry["code"]
        assert len(entry["message"]) >= 18, entry["code"]  # a constant piece long enough to be PyTorch's alone


def test_linear_on_a_hostile_line(tmp_path):
    index = _index(tmp_path)
    line = "max_tokens must be " * 20000
    started = time.perf_counter()
    assert index.match(line) == []
    assert time.perf_counter() - started < 2.0


def test_broken_index_is_one_clear_error(tmp_path):
    path = tmp_path / "sites.jsonl.gz"
    path.write_bytes(gzip.compress(b"not json\n"))
    with pytest.raises(SiteIndexError, match="sites.jsonl.gz: not a readable site index"):
        SiteIndex.load(path, cache=tmp_path / "cache")


def test_shipped_index_loads_and_answers():
    index = SiteIndex.load()
    assert len(index) > 1000
    (m, *_) = index.match("ValueError: max_tokens must be at least 1, got 0.")
    assert any(s.file == "vllm/sampling_params.py" for s in m.sites)


def test_unwritable_cache_is_one_clear_error(tmp_path):
    index = _index(tmp_path)  # noqa: F841 - writes the index file
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(SiteIndexError, match="cannot write the site cache"):
        SiteIndex.load(tmp_path / "sites" / "sites.jsonl.gz", cache=blocker / "cache")


def test_multi_line_message(tmp_path):
    data = SiteIndexData()
    part = Part("torch", "2.5.1", None)
    part.rows = [{"p": r"\nFound no NVIDIA driver on your system\. Please check that you\nhave an NVIDIA GPU and installed a driver",
                  "f": "torch/cuda/__init__.py", "n": 300, "fn": "_lazy_init", "c": None, "k": "raise", "e": "AssertionError"}]
    data.add(part)
    path = tmp_path / "s" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "c")
    text = "Traceback (most recent call last):\nRuntimeError: \nFound no NVIDIA driver on your system. Please check that you\nhave an NVIDIA GPU and installed a driver\nnext line\n"
    (m,) = index.match(text)
    assert (m.line_number, m.sites[0].function) == (3, "_lazy_init")
    # a longer message that begins the same is not this one, across lines as on one
    assert index.match(text.replace("a driver\n", "a driver from here\n")) == []


def test_a_pastes_whitespace_is_not_the_programs(tmp_path):
    """An issue shows a tab as spaces, a terminal re-wraps and re-indents a message's
    lines: each run of whitespace is one space on both sides, on a line and across lines.
    The words and their order still decide (a missing word, no match)."""
    data = SiteIndexData()
    part = Part("torch", "2.5.1", None)
    part.rows = [{"p": r"Error\(s\) in loading state_dict for ([\s\S]+?):\n\t([\s\S]+?)", "f": "torch/nn/modules/module.py",
                  "n": 2584, "fn": "Module.load_state_dict", "c": "len(error_msgs) > 0", "k": "raise", "e": "RuntimeError"},
                 {"p": r"\nFound no NVIDIA driver on your system\. Please check that you\nhave an NVIDIA GPU and installed a driver",
                  "f": "torch/cuda/__init__.py", "n": 300, "fn": "_lazy_init", "c": None, "k": "raise", "e": "AssertionError"},
                 {"p": MAX_TOKENS, "f": "vllm/sampling_params.py", "n": 200, "fn": "SamplingParams._verify_args",
                  "c": None, "k": "raise", "e": "ValueError"}]
    data.add(part)
    path = tmp_path / "s" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "c")
    pasted = ("Traceback (most recent call last):\nRuntimeError: Error(s) in loading state_dict for Net:\n"
              "        size mismatch for fc.weight: copying a param with shape torch.Size([4])")
    (m,) = index.match(pasted)  # "\n\t" pasted as a newline and eight spaces
    assert (m.line_number, m.sites[0].function) == (2, "Module.load_state_dict")
    (m,) = index.match("RuntimeError: Found no NVIDIA driver on your system.  Please check that\tyou have an\r\n"
                       "   NVIDIA GPU and installed a driver")  # re-wrapped, no leading newline
    assert (m.line_number, m.sites[0].function) == (1, "_lazy_init")
    tabbed = "ValueError: max_tokens\tmust be  at least 1,   got 0."
    assert [m.pattern for m in index.match(tabbed)] == [MAX_TOKENS]
    assert index.match("ValueError: max_tokens must be at 1, got 0.") == []
    # its line is where its text begins, though its first word is on an earlier line
    text = "Error(s) happened\nx\nRuntimeError: Error(s) in loading state_dict for Net:\n  size mismatch"
    assert [m.line_number for m in index.match(text)] == [3]
    # joined onto one line, a multi-line message is a line like any other: it matches
    # (its rare token state_dict makes it trusted there); a prose one must cover half its line
    (joined,) = index.match("RuntimeError: Error(s) in loading state_dict for Net: size mismatch")
    assert joined.sites[0].function == "Module.load_state_dict"
    driver = "Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver"
    assert trust(r"\nFound no NVIDIA driver on your system\. Please check that you\nhave an NVIDIA GPU and installed "
                 r"a driver")[0] == "strong"
    assert [m.line_number for m in index.match("a\n" + driver)] == [2]


def test_a_prose_multi_line_message_joined_onto_a_long_line_must_cover_half_of_it(tmp_path):
    """Folded, a multi-line pattern can match inside one line; there a prose ("half") one
    is held to the half-the-line rule as any pattern is (another library's long log line
    holding its words is not its message); spanning lines it is trusted as before."""
    data = SiteIndexData()
    part = Part("vllm", "0.9.0", None)
    pattern = r"Failed to upload the data to the server\.\nStatus code: (.+?)"
    part.rows = [{"p": pattern, "f": "vllm/up.py", "n": 5, "fn": "up", "c": None, "k": "raise", "e": "RuntimeError"}]
    data.add(part)
    path = tmp_path / "s" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "c")
    assert trust(pattern)[0] == "half"
    message = "Failed to upload the data to the server. Status code: 503"
    foreign = f"wandb: ERROR {message}; the run will be synced later by the background process, retrying in 30 seconds"
    assert index.match(foreign) == []
    # a line break after its last words (before the value) does not make it span lines
    # (its timestamp is a log header and does not count; a thread's or logger's name does: it
    # says whose message the line is. This line was one character over the old rule, timestamp
    # counted; the logger's name is longer here so that it is over without it)
    logged = ("2026-12-05 03:00:00,123 [uploader-thread-7] wandb.sdk.internal.sender.file_stream ERROR "
              "Failed to upload the data to the server. Status code:\n503")
    assert index.match(logged) == []
    # a logger's name after the level counts too, in each layout that names one (the names
    # below make the message just under half of the line without its timestamp and level)
    logger = "wandb.sdk.internal.sender.file_stream.uploader_thread_pool_executor"
    body = "Failed to upload the data to the server. Status code:\n503"
    assert index.match(f"2026-12-05 03:00:00,123 ERROR {logger}: {body}") == []
    assert index.match(f"ERROR:{logger}:{body}") == []
    assert index.match(f"2026-12-05 03:00:00.123 | ERROR    | {logger}:upload:12 - {body}") == []
    # and without the name the same message is trusted behind the same header
    assert [m.trust for m in index.match(f"2026-12-05 03:00:00,123 ERROR {body}")] == ["half"]
    assert [m.trust for m in index.match(f"ERROR:{body}")] == ["half"]
    assert [m.line_number for m in index.match("x\n" + message)] == [2]
    assert [m.line_number for m in index.match("x\nFailed to upload the data to the server.\n  Status code: 503")] == [2]


def test_the_batch_scan_keys_a_pattern_on_a_long_literal_a_few_patterns_share():
    """A pattern of the site index is scanned for by its longest literal that a few patterns
    share, not by a short unique word every other log line holds (" request" made 20% of
    the bench log's lines candidates); the records' matcher keeps its rarest-shared key."""
    from errkb.match import prefilter
    from errkb.match.sites import SHARED_KEY_OK

    pieces = ["Communication failed during ", " request"]
    usage = {"Communication failed during ": 2, " request": 1}
    assert prefilter.choose_key(pieces, usage, SHARED_KEY_OK) == "Communication failed during "
    assert prefilter.choose_key(pieces, usage) == " request"
    shared = {"Communication failed during ": SHARED_KEY_OK + 1, " request": 1}
    assert prefilter.choose_key(pieces, shared, SHARED_KEY_OK) == " request"  # shared too widely: the rare one


def test_the_batch_scan_without_hyperscan_finds_the_same_sites(tmp_path, monkeypatch):
    """Where Hyperscan is not installed the batch scan runs on pyahocorasick, with the same
    answers (its candidate sets were indexed like Hyperscan's lists, so every batch failed
    and enrich silently lost the tier)."""
    from errkb.match import engines

    if engines.ahocorasick is None:
        pytest.skip("needs pyahocorasick")
    lines = ["RuntimeError: Communication failed during all_reduce request: peer reset",
             "ValueError: max_tokens must be at least 1, got 0.",
             "GET /v1/completions request 200 OK",
             "RuntimeError: CUDA error: device-side assert triggered",
             # a literal two table entries share (CUDA's and NCCL's "invalid argument")
             "RuntimeError: CUDA error: invalid argument", "NCCL error in: x.cpp:1, invalid argument"]
    with_hyperscan = [m.pattern if m else None for m in SiteIndex.load(cache=tmp_path / "hs").match_lines(lines)]
    monkeypatch.setattr(engines, "hyperscan", None)
    without = [m.pattern if m else None for m in SiteIndex.load(cache=tmp_path / "ac").match_lines(lines)]
    assert without == with_hyperscan and without[1] and without[3] and without[2] is None
    assert without[4:] == ["invalid argument", "invalid argument"]


def test_a_site_matches_its_whole_message_not_the_start_of_a_longer_one(tmp_path):
    """A site raises its message whole: the text must not go on past the pattern's last literal
    with more words (another library's longer message begins the same), while a wrapper's
    trailer, a quote or the line's end may follow it (errkb.match.chunks.message_span)."""
    from errkb.match.chunks import message_span

    chunks = chunks_of("group_size must be greater than 0")
    for text in ("AssertionError: group_size must be greater than 0", "group_size must be greater than 0.",
                 "ValueError('group_size must be greater than 0')", '{"message": "group_size must be greater than 0"}',
                 "group_size must be greater than 0 [type=value_error, input_value=0]",
                 "group_size must be greater than 0 (parameter=group_size, value=0)",
                 "UserWarning: group_size must be greater than 0 (Triggered internally at ../c10/x.cpp:12.)",
                 "group_size must be greater than 0 or x; group_size must be greater than 0"):
        assert message_span(chunks, text) is not None, text
    for text in ("group_size must be greater than 0 or equal to -1", "group_size must be greater than 00",
                 "group_size must be greater than 0. Got -2", "group_size must be greater than 0 (got -2)",
                 "group_size must be greater than 0: -2"):
        assert message_span(chunks, text) is None, text
    assert message_span(chunks_of("got (.+?)"), "got 0 and more") == (0, 4)  # a trailing wildcard takes the rest
    # through the index, on a line and in the batch path
    index = _index(tmp_path)
    assert [m.pattern for m in index.match("ValueError: max_tokens must be at least 1, got 0.")] == [MAX_TOKENS]
    longer = "ValueError: max_tokens must be at least 1, got 0. Use max_new_tokens instead"
    assert index.match(longer) == [] and index.prepare_batch().match_lines([longer]) == [None]
    # a line of near-misses (the last literal again and again, each going on): one regex search of
    # the literal and a fixed lookahead per pattern (errkb.match.chunks._end_of), no placement loop
    hostile = "max_tokens must be at least 1, got 0.x" * 20_000
    assert index.match(hostile) == [] and index.prepare_batch().match_lines([hostile]) == [None]
    # a value holding many dots before the message's own end is still the message
    floats = "ValueError: max_tokens must be at least 1, got [" + ", ".join(f"0.{i}" for i in range(60)) + "]."
    assert [m.pattern for m in index.match(floats)] == [MAX_TOKENS]
    assert index.prepare_batch().match_lines([floats])[0] is not None
    # a line break or a tab after it ends the message (a multi-line cell, a TSV column); two
    # plain spaces do not (PyTorch separates sentences with two)
    for after in ("\nTraceback (most recent call last):", "\tnext column", ", Traceback (most recent call last):",
                  " request_id=7 status=500", " (sampling_params.py:679)", "    [sampling_params.py:679]"):
        text = "ValueError: max_tokens must be at least 1, got 0." + after
        assert [m.pattern for m in index.match(text)][:1] == [MAX_TOKENS], after
        assert index.prepare_batch().match_lines([text])[0] is not None, after
    for after in ("  Use max_new_tokens instead", "; max_new_tokens=1 is required", " (cuda:0)"):
        text = "ValueError: max_tokens must be at least 1, got 0." + after
        assert index.match(text) == [] and index.prepare_batch().match_lines([text]) == [None], after
    # a cell holding a line break before its message (an archive's cell): its site, no crash
    cells = ["x\nValueError: max_tokens must be at least 1, got 0.", "y", "ValueError: max_tokens must be at least 1, got 0."]
    assert [m and m.pattern for m in index.prepare_batch().match_lines(cells)] == [MAX_TOKENS, None, MAX_TOKENS]


def test_a_pytorch_cpp_site_says_its_releases_are_those_whose_source_was_read():
    """PyTorch's .cpp is read only where Debian serves its source (1.13.1, 2.6.0): "seen in torch
    1.13.1,2.6.0" would read as absent from 2.0-2.5, so such a site says what its list is."""
    cpp = Site("torch", "aten/src/ATen/TensorIterator.cpp", 501, "TensorIteratorBase::compute_types", None, "C++",
               "RuntimeError", "1.13.1,2.6.0", "2.6.0", None, "pytorch/pytorch", None)
    assert cpp.describe().endswith("seen in torch 1.13.1,2.6.0 (the releases whose C++ source errkb read)")
    header = Site("torch", "c10/util/Exception.h", 9, "f", None, "C++", "RuntimeError", "1.13.0-2.14.1", "2.14.1",
                  None, "pytorch/pytorch", None)
    assert header.describe().endswith("seen in torch 1.13.0-2.14.1")  # headers: every release's wheel


def test_an_info_line_site_says_it_is_logged_at_info_level():
    """The miner reads info-level log calls that report a failure ("Cannot use FlashAttention-2
    backend ..."): explain says the level, so nobody reads a fallback notice as a crash."""
    info = Site("vllm", "vllm/platforms/cuda.py", 280, "CudaPlatformBase.get_attn_backend_cls", None, "log", "INFO",
                "0.8.2-0.9.0", "0.9.0", None, "vllm-project/vllm", None)
    assert info.describe().startswith("logged at info level at vllm/platforms/cuda.py:280 in CudaPlatformBase.")
    warning = Site(*[{"error_class": "WARNING"}.get(n, getattr(info, n)) for n in Site.__slots__])
    assert warning.describe().startswith("logged at vllm/platforms/cuda.py:280")


def _cut_index(tmp_path):
    data = SiteIndexData()
    part = Part("vllm", "0.6.3", "a" * 40)
    part.rows = [
        {"p": r"The (.+?) prompt \(length (.+?)\) is longer than the maximum model length of (.+?)\. Make sure that "
              r"`max_model_len` is no smaller than the number of text tokens\.",
         "f": "vllm/engine/llm_engine.py", "n": 2010, "fn": "LLMEngine._validate_model_input", "c": None, "k": "raise",
         "e": "ValueError"},
        {"p": r"Model architectures (.+?) are not supported for now\. Supported architectures: (.+?)",
         "f": "vllm/model_executor/models/registry.py", "n": 400, "fn": "_raise_for_unsupported", "c": None,
         "k": "raise", "e": "ValueError"},
        {"p": r"Weights only load failed\. Re-running `torch\.load` with `weights_only` set to `False` will likely "
              r"succeed, but it can result in arbitrary code execution\. Do it only if you got the file from a trusted "
              r"source\.\n Please file an issue with the following so that we can make `weights_only=True` compatible "
              r"with your use case: WeightsUnpickler error: ([\s\S]+?)\n\nCheck the documentation of torch\.load",
         "f": "torch/serialization.py", "n": 1096, "fn": "load", "c": "weights_only", "k": "raise",
         "e": "UnpicklingError"},
        {"p": r"num_attention_heads \((.+?)\) must be divisible by tensor-parallel world size \((.+?)\)\.",
         "f": "vllm/model_executor/models/x.py", "n": 7, "fn": "f", "c": None, "k": "raise", "e": "ValueError"},
    ]
    data.add(part)
    path = tmp_path / "sites" / "sites.jsonl.gz"
    data.write(path)
    return SiteIndex.load(path, cache=tmp_path / "cache")


def test_a_text_cut_short_inside_a_message_gets_its_site_marked_truncated(tmp_path):
    """A title or a paste that lost the message's second sentence (xinference#3785, vllm#10990)
    begins a site's message and stops inside it: its site, marked truncated. A whole message of
    another library that a site's message merely begins with, or contains, is not one."""
    index = _cut_index(tmp_path)
    for text, file in (
        ("ValueError: [address=0.0.0.0:37591, pid=324770] The decoder prompt (length 17772) is longer than the "
         "maximum model length of 16384.", "vllm/engine/llm_engine.py"),  # a value, then the next sentence's "."
        ("ValueError: Model architectures ['Qwen2ForSequenceClassification'] are not supported for now",
         "vllm/model_executor/models/registry.py"),
        ("Model architectures ['A', 'B'] are not supported for n", "vllm/model_executor/models/registry.py"),
        ("The decoder prompt (length 17772) is longer than the maximum model len...", "vllm/engine/llm_engine.py"),
        ("Traceback (most recent call last):\n  File \"x.py\", line 1\nValueError: The encoder prompt (length 9) is "
         "longer than the maximum model length of 8. Make sure that `max_mod", "vllm/engine/llm_engine.py"),
    ):
        assert index.match(text) == [], text  # not the whole message
        found = index.match_cut(text)
        assert [s.file for m in found for s in m.sites] == [file], text
        assert found[0].truncated and found[0].as_dict()["truncated"] is True
        assert "stops inside its message" in found[0].describe()[0]
    # a multi-line message pasted without its last lines (CoFF#2, MiniCPM#185): it begins on an
    # earlier line, and the value it stops in may hold spaces once 60 letters/digits of it are given
    pickle = ("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
              "_pickle.UnpicklingError: Weights only load failed. Re-running `torch.load` with `weights_only` set to "
              "`False` will likely succeed, but it can result in arbitrary code execution. Do it only if you got the "
              "file from a trusted source.\n Please file an issue with the following so that we can make "
              "`weights_only=True` compatible with your use case: WeightsUnpickler error: Unsupported operand 118")
    (found,) = index.match_cut(pickle)
    assert (found.line_number, found.sites[0].file, found.truncated) == (3, "torch/serialization.py", True)
    for text in (
        "hidden_size must be divisible by num_attention_heads",  # begins one inside a sentence: its last word
        "Model architectures foo bar",  # a value holding a space, under 60 letters/digits before it
        "ValueError: The decoder prompt (length",  # under 20 letters/digits of it
        "Model architectures foo and bar are not supported.",  # a value of words, then only "."
        "The decoder prompt (length 9) is longer than the maximum model length of 8. Use a shorter prompt",
        "ValueError: max_tokens must be at least 1",
    ):
        assert index.match_cut(text) == [], text
    # the whole message is a match, not a cut
    whole = ("The decoder prompt (length 9) is longer than the maximum model length of 8. Make sure that "
             "`max_model_len` is no smaller than the number of text tokens.")
    assert index.match(whole) and index.match_cut(whole) == []
    # where the message begins, as a line of the text as given (leading blank lines and a long text too)
    title = "Model architectures ['Qwen2ForSequenceClassification'] are not supported for now"
    for before, line in (("\nfoo\n", 3), ("   \n\n\nfoo\nbar\n", 6), ("\tfoo\n", 2), ("\r\nfoo\r\n", 3),
                         ("\n" * 4100 + "foo\n", 4102)):
        assert [m.line_number for m in index.match_cut(before + title)] == [line], repr(before[:12])
    # a logging format's " - ", a sentence's end, a text that stops right before a value, pydantic's
    # words before a validator's message (vLLM's config errors), not any other comma
    assert index.match_cut("A note, Model architectures ['X'] are not supported for now.") == []
    assert index.match_cut("DefaultValue error, Model architectures ['X'] are not supported for now.") == []
    for text in ("2024-05-01 10:00:00,123 - vllm - ERROR - Model architectures ['X'] are not supported for n",
                 "Value error, Model architectures ['LlavaQwenForCausalLM'] are not supported for now.",
                 "  Assertion failed, Model architectures ['X'] are not supported for now",
                 "Failed to load. Model architectures ['X'] are not supported",
                 "Model architectures ['X'] are not supported for now. Supported architectures: "):
        assert [s.file for m in index.match_cut(text) for s in m.sites] == ["vllm/model_executor/models/registry.py"]
    # a one-line message does not take in the lines after it as its value
    assert index.match_cut("The decoder prompt (length 17772) is longer than the maximum model length of 1\n"
                           "Traceback (most recent call last):\nKeyError: 'sales'") == []
    # an undecodable byte read as a lone surrogate
    assert index.match_cut("\ud800Model architectures \ud800 are not") == []
    # a hostile line: bounded lookups (MAX_CUT_LOOKUPS), the last MAX_CUT_TEXT characters only
    assert index.match_cut(": The decoder prompt (length " * 50_000) == []
    assert index.match_cut("Model architectures " * 50_000 + "x") == []


def test_a_class_built_message_answers_once_and_a_short_one_by_its_printed_form(tmp_path):
    """The miner gives a class-built message twice: alone and after the class's name. The
    message alone answers where it is trusted (one answer per site, not two); a short one
    ("backend=... raised:") is served only as a traceback prints it, after the class's name."""
    data = SiteIndexData()
    engine = r"EngineCore encountered an issue\. See stack trace \(above\) for the root cause\."
    backend = r"backend=([\s\S]+?) raised:\n([\s\S]+?): ([\s\S]+?)"
    rows = [{"p": p, "f": f, "n": n, "fn": fn, "c": None, "k": "factory", "e": e} for p, f, n, fn, e in (
        (engine, "vllm/v1/engine/exceptions.py", 19, "EngineDeadError.__init__", "EngineDeadError"),
        ("EngineDeadError: " + engine, "vllm/v1/engine/exceptions.py", 19, "EngineDeadError.__init__", "EngineDeadError"),
        (backend, "torch/_dynamo/exc.py", 92, "BackendCompilerFailed.__init__", "BackendCompilerFailed"),
        ("BackendCompilerFailed: " + backend, "torch/_dynamo/exc.py", 92, "BackendCompilerFailed.__init__",
         "BackendCompilerFailed"))]
    part = Part("vllm", "0.34.0", None)
    part.rows = rows
    data.add(part)
    path = tmp_path / "sites" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "cache")
    found = index.match("(APIServer pid=1) vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."
                        " See stack trace (above) for the root cause.")
    assert [(m.pattern, m.sites[0].function) for m in found] == [(engine, "EngineDeadError.__init__")]
    paste = ("    raise BackendCompilerFailed(self.compiler_fn, e) from e\n"
             "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
             "CalledProcessError: Command '['/usr/bin/gcc']' returned non-zero exit status 1.")
    found = index.match(paste)
    assert [(m.line_number, m.sites[0].describe()) for m in found] == [
        (2, "built at torch/_dynamo/exc.py:92 in BackendCompilerFailed.__init__; seen in vllm 0.34.0")]
    # its message alone is too short to tell from another library's
    assert index.match("backend='inductor' raised:\nCalledProcessError: boom") == []


def test_a_printed_form_stronger_than_its_message_is_kept(tmp_path):
    """A prose ("half") message whose printed form is strong (the class's name is a rare token):
    both are served, so a line with more text than the message still gets its site (review)."""
    data = SiteIndexData()
    queue = "the request could not be scheduled because the queue is full"
    part = Part("vllm", "0.34.0", None)
    part.rows = [{"p": p, "f": "vllm/exceptions.py", "n": 170, "fn": "QueueOverflowError.__init__", "c": None,
                  "k": "factory", "e": "QueueOverflowError"} for p in (queue, "QueueOverflowError: " + queue)]
    data.add(part)
    path = tmp_path / "sites" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "cache")
    assert (trust(queue)[0], trust("QueueOverflowError: " + queue)[0]) == ("half", "strong")
    line = ("while serving the chat completion for the client we hit an error in the frontend: "
            f"vllm.exceptions.QueueOverflowError: {queue}")
    assert [m.pattern for m in index.match(line)] == ["QueueOverflowError: " + queue]


def test_a_half_patterns_values_between_its_literals_are_its_own_text(tmp_path):
    """vLLM's KeyError "invalid tool call parser: openai (chose from { ...19 parsers... })" (fresh
    9): its literal text is a third of the line, its list a value between two of its literals.
    What it matched from its first literal to its last covers the message; a value it ends with
    is not its own (any text may follow), so there the literal text alone counts, as before."""
    data = SiteIndexData()
    part = Part("vllm", "0.10.1", None)
    part.rows = [{"p": p, "f": "vllm/entrypoints/openai/api_server.py", "n": n, "fn": "validate_api_server_args", "c": None,
                  "k": "raise", "e": "KeyError"} for p, n in (
        (r"invalid tool call parser: (.+?) \(chose from \{ (.+?) \}\)", 1790),
        ("could not load the tokenizer configuration from (.+?)", 1800),
        (r"could not read the tokenizer configuration from (.+?)\.", 1810))]
    data.add(part)
    path = tmp_path / "sites" / "sites.jsonl.gz"
    data.write(path)
    index = SiteIndex.load(path, cache=tmp_path / "cache")
    parsers = ", ".join(f"parser_{k}" for k in range(19))
    line = f"(APIServer pid=966592) KeyError: 'invalid tool call parser: openai (chose from {{ {parsers} }})'"
    assert [(m.trust, m.sites[0].line) for m in index.match(line)] == [("half", 1790)]
    assert [m and m.trust for m in index.match_lines([line])] == ["half"]
    # a short match in a long line of other text: still only where it covers half the line
    assert index.match("while loading the plugin registry we could not go on: " * 3
                       + "invalid tool call parser: x (chose from { a })") == []
    assert index.match("could not load the tokenizer configuration from " + "/a/very/long/path" * 8) == []
    # a value the pattern does not enclose, before its sentence's end, may be any text (review)
    foreign = ("the mirror because transformers raised OSError: we could not connect to huggingface.co to "
               "resolve the file and no local copy was found either.")
    assert index.match("could not read the tokenizer configuration from " + foreign) == []
    assert index.match_lines(["could not read the tokenizer configuration from " + foreign]) == [None]
