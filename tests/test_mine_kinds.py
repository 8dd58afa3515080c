"""The miner reads every kind of site a user meets, with its function and condition:
raise, assert with a message, warnings.warn, logger calls (%-args templated) and
exception factories; C++ checks (TORCH_CHECK, FLASHINFER_CHECK/ERROR, throw, oss chains)."""

from __future__ import annotations

import re

import pytest

from errkb.mine.cpp_sites import cpp_sites
from errkb.mine.raise_sites import ALL_KINDS, sites_in_source

SOURCE = '''
import logging
import warnings
logger = logging.getLogger(__name__)

class SamplingParams:
    def _verify_args(self):
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be at least 1, got {self.max_tokens}.")
        if self.n is None:
            pass
        else:
            logger.warning("n is %d, best_of is %s", self.n, self.best_of)
        assert self.x == 3, "x must be three"
        assert not self.y, "y must be unset"
        assert self.z  # no message: not a site

def make(kind):
    if kind:
        return ValueError("unknown kind %s" % kind)
    warnings.warn("deprecated thing here", DeprecationWarning)
    logger.info("info lines are not errors")
    logger.error("bad %(what)s happened", {"what": kind})
    logger.info("Cannot use FlashAttention-2 backend for head size %d.", kind)
    logger.info_once("Using XFormers backend.")
    logger.info(f"Status of the run: {STATUS['invalid']}")
'''


def _by_kind(kinds=ALL_KINDS):
    return {(s.kind, s.template.pattern() if s.template else s.reason): s for s in sites_in_source(SOURCE, "a.py", kinds=kinds)}


def test_every_kind_with_function_and_condition():
    sites = _by_kind()
    raise_ = sites[("raise", r"max_tokens must be at least 1, got (.+?)\.")]
    assert raise_.function == "SamplingParams._verify_args"
    assert raise_.condition == "self.max_tokens is not None and self.max_tokens < 1"
    log = sites[("log", "n is (.+?), best_of is (.+?)")]
    assert (log.error_class, log.condition) == ("WARNING", "self.n is not None")  # the else of `if self.n is None`
    assert sites[("assert", "x must be three")].condition == "self.x != 3"
    assert sites[("assert", "y must be unset")].condition == "self.y"
    factory = sites[("factory", "unknown kind (.+?)")]
    assert (factory.function, factory.error_class, factory.condition) == ("make", "ValueError", "kind")
    assert sites[("warn", "deprecated thing here")].error_class == "DeprecationWarning"
    assert sites[("log", "bad (.+?) happened")].error_class == "ERROR"
    assert not any("info lines" in (k[1] or "") for k in sites)
    # an info line is read where its text says something failed: what users paste ("why does it fall back?")
    assert sites[("log", r"Cannot use FlashAttention-2 backend for head size (.+?)\.")].error_class == "INFO"
    assert not any("XFormers" in (k[1] or "") or "Status" in (k[1] or "") for k in sites)  # a field's words are not its text
    assert sum(1 for k in sites if k[0] == "assert") == 2


SERVER = '''
class OpenAIServingModels:
    async def check_model(self, request):
        if request.model not in self.models:
            return self.create_error_response(
                message=f"The model `{request.model}` does not exist.",
                err_type="NotFoundError", status_code=HTTPStatus.NOT_FOUND)

    async def create_chat_completion(self, request):
        if request.n > 1 and request.use_beam_search:
            return self.create_error_response(f"Only one of n={request.n} and use_beam_search can be set at a time")
        try:
            self.render(request)
        except ValueError as e:
            return self.create_error_response(str(e))
        error = create_streaming_error_response(f"Streaming is not supported for model {self.name} yet")
'''


def test_an_http_error_a_server_returns_is_a_response_site_with_its_error_type():
    """vLLM's OpenAI server returns its request errors as HTTP responses (what a client pastes:
    `{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError"}`),
    built with create_error_response: each with its type (BadRequestError when not given)."""
    sites = {s.template.pattern() if s.template else s.reason: s
             for s in sites_in_source(SERVER, "vllm/entrypoints/openai/serving_models.py", kinds=ALL_KINDS)}
    model = sites["The model `(.+?)` does not exist\\."]
    assert (model.kind, model.error_class, model.function, model.condition) == (
        "response", "NotFoundError", "OpenAIServingModels.check_model", "request.model not in self.models")
    beam = sites["Only one of n=(.+?) and use_beam_search can be set at a time"]
    assert (beam.kind, beam.error_class) == ("response", "BadRequestError")
    assert sites["Streaming is not supported for model (.+?) yet"].kind == "response"
    assert "message is a call result" in sites  # str(e): the message is the exception's, raised elsewhere
    assert not sites_in_source(SERVER, "a.py")  # drafts and drift read raises only


@pytest.mark.parametrize(("call", "error_class", "pattern"), [
    # another helper of the same name, (type, message) or (status, message): not read as (message, type)
    ('create_error_response("invalid_request_error", "The model does not exist on this server at all")', None, None),
    ('create_error_response(HTTPStatus.BAD_REQUEST, "The model does not exist on this server at all")', None, None),
    # an error type computed at run time is unknown, not the helper's default
    ('self.create_error_response(f"The model `{m}` does not exist.", err_type=kind)', None, "The model `(.+?)` does not exist\\."),
    ('self.create_error_response(f"The model `{m}` does not exist.", "NotFoundError")', "NotFoundError", "The model `(.+?)` does not exist\\."),
])
def test_a_response_site_reads_only_the_message_and_error_type_of_create_error_response(call, error_class, pattern):
    (site,) = sites_in_source(f"def f(self, m, kind):\n    return {call}\n", "a.py", kinds=ALL_KINDS)
    assert site.kind == "response" and site.error_class == error_class
    assert (site.template.pattern() if site.template else None) == pattern


def test_default_kinds_are_unchanged():
    # drafts and drift read raises only: their output must not change.
    assert {k[0] for k in _by_kind(frozenset({"raise"}))} == {"raise"}
    assert {s.kind for s in sites_in_source(SOURCE, "a.py")} == {"raise"}
    assert {s.kind for s in sites_in_source(SOURCE, "a.py", warnings=True)} == {"raise", "warn"}


CPP = r'''
namespace flashinfer {
void run_kernel(at::Tensor q, int64_t dim) {
  TORCH_CHECK(q.dim() == 3, "q must be a 3D tensor, got ", q.dim(), "D");
  FLASHINFER_CHECK(dim % 8 == 0, "head_dim must be a multiple of 8");
  if (dim > 256) {
    std::ostringstream err_msg;
    err_msg << "Unsupported head_dim: " << dim;
    FLASHINFER_ERROR(err_msg.str());
  }
  throw std::invalid_argument("bad layout " + std::to_string(dim) + " for kernel");
  // TORCH_CHECK(false, "commented out check");
  TORCH_CHECK(x, "never closed"
'''


def test_cpp_checks_errors_throws_and_streams():
    sites = list(cpp_sites(CPP, "csrc/k.cu"))
    patterns = {s.template.pattern(): s for s in sites if s.template}
    check = patterns["q must be a 3D tensor, got (.+?)D"]
    assert (check.line, check.function, check.condition) == (4, "run_kernel", "not (q.dim() == 3)")
    assert "head_dim must be a multiple of 8" in patterns
    assert "Unsupported head_dim: (.+?)" in patterns
    assert patterns["bad layout (.+?) for kernel"].error_class == "invalid_argument"
    assert not any("commented out" in p for p in patterns)
    # C++ it cannot follow is a reason, never a guess or a crash.
    assert [s.reason for s in sites if s.template is None] == ["argument list not closed within 6000 characters"]


# FlashInfer's C++ from 0.4 on (tvm-ffi): the message is streamed after the check; and 0.2's
# checks whose message is a std::string concatenation.
TVM_CPP = r"""
void single_decode(TensorView q, int64_t top_k) {
  TVM_FFI_ICHECK(status == cudaSuccess)
      << "SingleDecodeWithKVCache kernel launch failed, error: "
      << cudaGetErrorString(status);
  TVM_FFI_ICHECK_EQ(q.ndim(), 2) << "q must be a 2D tensor";
  TVM_FFI_CHECK(top_k > 0, ValueError) << "top_k must be positive, got " << top_k;
  if (bad) {
    TVM_FFI_THROW(NotImplementedError) << "Unsupported dtype " << dtype << " for sampling";
  }
  TVM_FFI_ICHECK_LE(q.size(0), 8);
  TORCH_CHECK(status == cudaSuccess, "TopPSamplingFromProbs failed with error code " +
              std::string(cudaGetErrorString(status)));
  TORCH_CHECK(n > 0, "size must be positive, got ", n + 1);
}
"""


def test_tvm_ffi_streamed_checks_and_string_concatenation():
    sites = list(cpp_sites(TVM_CPP, "csrc/single_decode.cu"))
    patterns = {s.template.pattern(): s for s in sites if s.template}
    launch = patterns["SingleDecodeWithKVCache kernel launch failed, error: (.+?)"]
    assert (launch.line, launch.function, launch.error_class, launch.condition) == (
        3, "single_decode", "RuntimeError", "not (status == cudaSuccess)")
    assert patterns["q must be a 2D tensor"].condition == "not (q.ndim() == 2)"
    positive = patterns["top_k must be positive, got (.+?)"]
    assert (positive.error_class, positive.condition) == ("ValueError", "not (top_k > 0)")
    thrown = patterns["Unsupported dtype (.+?) for sampling"]
    assert (thrown.error_class, thrown.condition) == ("NotImplementedError", None)
    assert "TopPSamplingFromProbs failed with error code (.+?)" in patterns
    # arithmetic inside a check's message is one value, not two
    assert "size must be positive, got (.+?)" in patterns
    # a check with nothing streamed into it has no message of its own: a reason, not a guess
    assert [s.reason for s in sites if s.template is None] == ["tvm-ffi check without a streamed message"]
    # what a user pastes: tvm-ffi puts "Check failed: (cond) is false: " before the message
    assert re.search(launch.template.pattern(), "RuntimeError: Check failed: (status == cudaSuccess) is false: "
                     "SingleDecodeWithKVCache kernel launch failed, error: no kernel image is available")


# PyTorch's own C++ forms, as its wheels' headers hold them (c10/util/Exception.h,
# torch/csrc/distributed/c10d/NCCLUtils.hpp): a typed check inside a macro body whose
# message is a variable built with +, C10_THROW_ERROR, c10::str, an unconditional check.
TORCH_CPP = r'''
#define C10D_NCCL_CHECK(cmd, failureReason)                                   \
  do {                                                                        \
    ncclResult_t result = cmd;                                                \
    if (result != ncclSuccess) {                                              \
      std::string err = "NCCL error in: " + std::string(__FILE__) + ":" +     \
          std::to_string(__LINE__) + ", " + ncclGetErrorWithVersion(result) + \
          "\n" + getNcclErrorDetailStr(result, failureReason);                \
      TORCH_CHECK_WITH(DistBackendError, false, err);                         \
    }                                                                         \
  } while (0)

inline void checkSplitSizes(const std::vector<int64_t>& split_sizes, int group_size) {
  TORCH_CHECK(
      split_sizes.size() == group_size,
      "Number of tensor splits not equal to group size");
  auto msg = c10::str("Socket Timeout after ", elapsed, " ms waiting for rank ", rank);
  C10_THROW_ERROR(DistNetworkError, msg);
  TORCH_CHECK(false, c10::str("Expected all tensors on device ", device, ", got ", other));
  TORCH_CHECK(ok, message_from_caller);
}
'''


def test_pytorch_cpp_forms():
    sites = list(cpp_sites(TORCH_CPP, "torch/csrc/distributed/c10d/NCCLUtils.hpp"))
    patterns = {s.template.pattern(): s for s in sites if s.template}
    nccl = patterns[r"NCCL error in: ([\s\S]+?):([\s\S]+?), ([\s\S]+?)\n([\s\S]+?)"]
    assert (nccl.error_class, nccl.line, nccl.condition) == ("DistBackendError", 9, None)
    assert patterns["Number of tensor splits not equal to group size"].condition == (
        "not (split_sizes.size() == group_size)")
    timeout = patterns["Socket Timeout after (.+?) ms waiting for rank (.+?)"]
    assert (timeout.error_class, timeout.function) == ("DistNetworkError", "checkSplitSizes")
    assert "Expected all tensors on device (.+?), got (.+?)" in patterns
    # a message handed in by the caller is not guessed
    assert [s.reason for s in sites if s.template is None] == ["message is a variable not defined nearby"]
    assert re.search(nccl.template.pattern(), "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error "
                     "(run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\nncclSystemError: System call")


def test_a_tvm_ffi_stream_skips_its_comments_and_reads_a_message_variable_above_it():
    src = '''void f(int x) {
  TVM_FFI_ICHECK(x > 0) << "head dim must be positive"  // it's the why
      << " got " << x;
  std::string msg = "the workspace buffer is too small for this batch";
  TVM_FFI_ICHECK(x < 9) << msg;
  TVM_FFI_ICHECK(x != 3)  /* note; see */ << "three is not a supported page size here: " << x;
}
'''
    got = [(c.line, c.condition, c.template.pattern() if c.template else c.reason) for c in cpp_sites(src, "a.cu")]
    assert got == [(2, "not (x > 0)", "head dim must be positive got (.+?)"),
                   (5, "not (x < 9)", "the workspace buffer is too small for this batch"),
                   (6, "not (x != 3)", "three is not a supported page size here: (.+?)")]


def test_atens_structured_kernels_name_their_function():
    """ATen's TORCH_META_FUNC(name) / TORCH_IMPL_FUNC(name) bodies have no return type before the
    name: their checks are theirs, not the previous function's (clamp's check was named after the
    isin helper above it)."""
    source = '''static inline void check_for_unsupported_isin_dtype(const ScalarType type) {
  TORCH_CHECK(type != ScalarType::Bool, "Unsupported input type encountered for isin(): ", type);
}

TORCH_META_FUNC(clamp) (
const Tensor& self) {
  TORCH_CHECK(!isComplexType(self.scalar_type()), "clamp is not supported for complex types");
}

TORCH_META_FUNC2(clamp, Tensor) (const Tensor& self) {
  TORCH_CHECK(false, "torch.clamp: At least one of 'min' or 'max' must not be None");
}
'''
    names = {s.template.pattern(): s.function for s in cpp_sites(source, "aten/src/ATen/native/TensorCompare.cpp")}
    assert names == {r"Unsupported input type encountered for isin\(\): (.+?)": "check_for_unsupported_isin_dtype",
                     "clamp is not supported for complex types": "TORCH_META_FUNC(clamp)",
                     r"torch\.clamp: At least one of 'min' or 'max' must not be None": "TORCH_META_FUNC2(clamp, Tensor)"}


MULTI_ARG = '''
def check(self, kv_cache_dtype, min_capability, capability):
    if kv_cache_dtype not in ("fp8_e4m3", "fp8_e5m2"):
        raise ValueError("Unsupported FP8 dtype:", kv_cache_dtype)
    if capability < min_capability:
        raise RuntimeError("Quantization scheme is not supported for ",
                           f"the current GPU. Min capability: {min_capability}. ",
                           f"Current capability: {capability}.")
    if capability > 100:
        raise ValueError("Incorrect type of image_embeds", f"Got type: {type(kv_cache_dtype)}")
    if not capability:
        raise RuntimeError(CUDA_MISMATCH_MESSAGE, capability, min_capability)
    if capability is None:
        raise ValueError(kv_cache_dtype, None)
    raise OSError(2, "No such file or directory")


CUDA_MISMATCH_MESSAGE = "The detected CUDA version (%s) mismatches the version that was used to compile PyTorch (%s)."
'''


def test_an_exception_given_several_arguments_says_their_tuple():
    """Python prints a built-in exception of several arguments as their tuple's repr, and that
    is what users paste (vllm#14040's title): the pattern is that text, not the first argument."""
    sites = sites_in_source(MULTI_ARG, "a.py")
    by_line = {}
    for s in sites:
        by_line.setdefault(s.line, []).append(s)

    def patterns(line):
        return [s.template.pattern() for s in by_line[line] if s.template]

    def printed(line, *args, cls=ValueError):
        # the message as Python prints it matches one of the site's patterns, whole
        return any(re.fullmatch(p, str(cls(*args))) for p in patterns(line))

    assert printed(4, "Unsupported FP8 dtype:", "fp8")
    pasted = "RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min capability: 80. ', 'Current capability: 75.')"
    assert any(re.search(p, pasted) for p in patterns(6))
    assert not any(re.search(p, "Quantization scheme is not supported for the current GPU. Min capability: 80.")
                   for p in patterns(6))
    # a value holding a single quote makes repr quote with double ones (vLLM's minicpmv)
    assert printed(10, "Incorrect type of image_embeds", f"Got type: {type([])}")
    # a module constant as the first argument is read, then quoted as repr does (torch's cpp_extension)
    assert printed(12, "The detected CUDA version (%s) mismatches the version that was used to compile PyTorch (%s).",
                   "12.9", "12.8", cls=RuntimeError)
    # (value, None) has no text of its own: no pattern
    assert all(s.template is None for s in by_line[14])
    # OSError builds its own text from (errno, strerror): not read as a tuple
    assert all(s.template is None for s in by_line[15])


def test_a_cuda_kernel_assertion_is_a_site_of_its_stringified_condition():
    """``CUDA_KERNEL_ASSERT(cond)`` prints "Assertion `cond` failed." on the device, the
    condition as the preprocessor writes it (whitespace runs as one space, comments gone):
    the line users paste ahead of "device-side assert triggered"."""
    source = '''
template <typename T>
__global__ void indexSelectLargeIndex(T* dst, int64_t n) {
  CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize);
  CUDA_KERNEL_ASSERT(idx_dim >= 0 && idx_dim < index_size
                     && "index out of bounds");  // why
}
#define CUDA_KERNEL_ASSERT(cond) assert(cond)
'''
    sites = list(cpp_sites(source, "aten/src/ATen/native/cuda/Indexing.cu"))
    assert [(s.line, s.function, s.kind, s.error_class, s.condition) for s in sites] == [
        (4, "indexSelectLargeIndex", "assert", "RuntimeError", "not (srcIndex < srcSelectDimSize)"),
        (5, "indexSelectLargeIndex", "assert", "RuntimeError",
         'not (idx_dim >= 0 && idx_dim < index_size && "index out of bounds")')]
    printed = ('/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:144: operator(): block: [0,0,0], thread: '
               '[0,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && "index out of bounds"` failed.')
    assert re.search(sites[1].template.pattern(), printed)
    assert sites[0].template.pattern() == r"Assertion `srcIndex < srcSelectDimSize` failed\."


HELPER_MODULE = '''
import os

class Unsupported(RuntimeError):
    pass

_NOTHING = object()

def unimplemented(msg: str, *, from_exc=_NOTHING, case_name=None):
    """Raise Unsupported."""
    assert msg != os.environ.get("BREAK", False)
    if from_exc is not _NOTHING:
        raise Unsupported(msg, case_name=case_name) from from_exc
    raise Unsupported(msg, case_name=case_name)

def reworded(msg):
    msg = msg.upper()
    raise Unsupported(msg)

def in_this_module(x):
    if x > 3:
        unimplemented(f"graph break on the value {x} in this very module")
'''

HELPER_CALLER = '''
from ..exc import unimplemented, reworded
from ..utils import record

class SkipFunctionVariable:
    def call_function(self, tx):
        if self.value in builtins:
            msg = f"Graph break due to unsupported Python builtin {self.value.__module__}.{self.value.__qualname__}. "
            unimplemented(msg)
        reworded(f"a message its helper rewords before raising it {tx}")
        record(f"a call that raises nothing with enough literal text {tx}")
'''


def test_a_call_to_a_raising_helper_is_a_raise_site(tmp_path):
    """torch.compile's graph breaks are raised through ``unimplemented(msg)`` (pytorch#133965):
    a short function that raises its first argument. A call to one is a raise site of that
    argument, in its own module or, read across the release, in any module that imports it."""
    import zipfile

    from errkb.mine.releases import LIBRARIES, read_release

    wheel = tmp_path / "torch-9.0.0-cp311-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/_dynamo/exc.py", HELPER_MODULE)
        zf.writestr("torch/_dynamo/variables/functions.py", HELPER_CALLER)
        zf.writestr("torch/_dynamo/utils.py", "def record(msg):\n    print(msg)\n")
    rows = read_release(wheel, LIBRARIES["torch"], "9.0.0", commit="a" * 40).rows
    got = {(r["f"], r["fn"], r["c"], r["k"], r["e"], r["p"]) for r in rows}
    assert got == {
        ("torch/_dynamo/exc.py", "in_this_module", "x > 3", "raise", "Unsupported",
         "graph break on the value (.+?) in this very module"),
        ("torch/_dynamo/variables/functions.py", "SkipFunctionVariable.call_function", "self.value in builtins",
         "raise", "Unsupported", r"Graph break due to unsupported Python builtin (.+?)\.(.+?)\."),
    }
    # without a release's read (errkb mine, drift), a call stays a call
    assert [s for s in sites_in_source(HELPER_MODULE, "torch/_dynamo/exc.py") if s.template] == []


GRAPH_BREAK_MODULE = '''
import textwrap

class Unsupported(RuntimeError):
    pass

_NOTHING = object()

def format_graph_break_message(gb_type, context, explanation, hints):
    explanation = textwrap.indent(explanation, "    ").lstrip()
    hints_str = "\\n".join("  Hint: " + textwrap.indent(hint, "    ").lstrip() for hint in hints)
    context = textwrap.indent(context, "    ").lstrip()

    msg = f"""\\
{gb_type}
  Explanation: {explanation}
{hints_str}

  Developer debug context: {context}"""
    link = get_link(gb_type)
    if link:
        msg += f"\\n\\n For more details about this graph break, please visit: {link}"
    return msg

def unimplemented(*, gb_type, context, explanation, hints, from_exc=_NOTHING, log_warning=False):
    msg = format_graph_break_message(gb_type, context, explanation, hints)
    if log_warning:
        log.warning(msg)
    if from_exc is not _NOTHING:
        if isinstance(from_exc, Unsupported):
            msg = f"{from_exc.msg}\\n\\n*** While handling this graph break, another graph break occurred: ***\\n\\n{msg}"
            raise Unsupported(msg, gb_type)
        raise Unsupported(msg, gb_type) from from_exc
    raise Unsupported(msg, gb_type)

def unimplemented_with_warning(e, code, gb_type, context, explanation, hints):
    unimplemented(gb_type=gb_type, context=context, explanation=explanation, hints=hints, from_exc=e)

def raise_type_error(name, expected):
    raise TypeError(f"{name} must be {expected}")

def reworded(gb_type, context):
    msg = format_graph_break_message(gb_type, context, "", [])
    msg = msg.upper()
    raise Unsupported(msg)
'''

GRAPH_BREAK_CALLER = '''
from ..exc import unimplemented, raise_type_error, reworded

class SkipFunctionVariable:
    def call_function(self, tx, fn, args):
        if self.value is torch._dynamo.graph_break:
            unimplemented(
                gb_type="Call to `torch._dynamo.graph_break()`",
                context=f"Called `torch._dynamo.graph_break()` with args `{args}`",
                explanation=f"User-inserted graph break. Message: {self.msg}",
                hints=["Remove the `torch._dynamo.graph_break()` call."],
            )
        explanation = f"Dynamo developers have intentionally marked that the function `{fn}` should not be traced."
        unimplemented(gb_type="Attempted to call function marked as skipped", context=str(fn),
                      explanation=explanation, hints=[])
        raise_type_error("the compiled function's first argument", "a tensor")
        reworded("a message its helper rewords", f"{fn}")

    def import_result(self):
        unimplemented(gb_type="Bad import result", context="",
                      explanation="Import result is not a Python module.", hints=[])
'''


def test_a_helper_that_raises_a_message_it_builds_from_its_parameters(tmp_path):
    """torch 2.7+ raises graph breaks through ``unimplemented(gb_type=..., context=...,
    explanation=..., hints=[...])``, which formats its arguments with
    ``format_graph_break_message`` before it raises them: each call is a site whose pattern
    is the formatted message, the call's text in the helper's frame."""
    import zipfile

    from errkb.mine.releases import LIBRARIES, read_release

    wheel = tmp_path / "torch-9.0.0-cp311-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/_dynamo/exc.py", GRAPH_BREAK_MODULE)
        zf.writestr("torch/_dynamo/variables/functions.py", GRAPH_BREAK_CALLER)
    rows = read_release(wheel, LIBRARIES["torch"], "9.0.0", commit="a" * 40).rows
    got = {(r["fn"], r["c"], r["e"], r["p"]) for r in rows if r["f"].endswith("functions.py")}
    # the wrapper that only passes its parameters on, and the helper that rewords, give no site
    assert got == {
        ("SkipFunctionVariable.call_function", "self.value is torch._dynamo.graph_break", "Unsupported",
         r"Call to `torch\._dynamo\.graph_break\(\)`\n  Explanation: User-inserted graph break\. Message: ([\s\S]+?)"
         r"\n([\s\S]+?)\n\n  Developer debug context: Called `torch\._dynamo\.graph_break\(\)` with args `([\s\S]+?)`"),
        ("SkipFunctionVariable.call_function", None, "Unsupported",
         r"Attempted to call function marked as skipped\n  Explanation: Dynamo developers have intentionally marked "
         r"that the function `([\s\S]+?)` should not be traced\.\n\n\n  Developer debug context: ([\s\S]+?)"),
        ("SkipFunctionVariable.call_function", None, "TypeError",
         "the compiled function's first argument must be a tensor"),
        # an empty context and no hints: nothing where they go, as the formatter writes it
        ("SkipFunctionVariable.import_result", None, "Unsupported",
         r"Bad import result\n  Explanation: Import result is not a Python module\.\n\n\n  Developer debug context:"),
    }
    # the patterns match what the module's own formatter writes for those arguments
    module: dict = {"get_link": lambda gb_type: None}
    exec(GRAPH_BREAK_MODULE, module)
    written = module["format_graph_break_message"]("Bad import result", "", "Import result is not a Python module.", [])
    assert re.search(next(p for fn, *_, p in got if fn.endswith("import_result")), written)
    written = module["format_graph_break_message"](
        "Call to `torch._dynamo.graph_break()`", "Called `torch._dynamo.graph_break()` with args `(1,)`",
        "User-inserted graph break. Message: no", ["Remove the `torch._dynamo.graph_break()` call."])
    assert re.search(next(p for *_, p in got if p.startswith("Call to")), written)
    pasted = ("torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped\n"
              "  Explanation: Dynamo developers have intentionally marked that the function `current_stream` "
              "should not be traced.\n\n\n"
              "  Developer debug context: module: torch.cuda, qualname: current_stream")
    assert any(re.search(p, pasted) for *_, p in got)
    assert not any(r["fn"] == "unimplemented_with_warning" for r in rows)


HELPER_EDGES = '''
import textwrap

def convert(dtype):
    if dtype == "int32":
        return 4
    raise ValueError(f"cannot convert the dtype {dtype} to a kernel type")

def shaped(kind, explanation):
    explanation = textwrap.indent(explanation, "    ")
    raise RuntimeError(f"{kind} failed\\n  Explanation: {explanation}")

def stripped(why):
    why = why.strip()
    raise ValueError(f"bad config: {why}")

def exhausted(name):
    yield 1
    raise ValueError(f"{name} exhausted")

def deep(a):
    raise ValueError(a + "x" + DEEP_CHAIN)

def callers(x):
    convert("float64 with some literal text")
    shaped("Kernel build", "the one-line reason given at this call")
    shaped("Kernel launch", "a reason of two lines,\\nre-indented by the helper")
    shaped(x, x)
    stripped("  the cache size is negative\\n")
    exhausted("the token stream")
    deep("a message through a very deep chain")
'''.replace("DEEP_CHAIN", " + ".join(["a"] * 1500))


def test_what_a_helper_call_keeps_of_its_arguments():
    """A function that returns a value where it can is a converter, not a raising helper; an
    argument the helper re-indents or strips keeps its text as changed, only on one line for a
    re-indent (a multi-line one's indentation changes: a value); a call whose own arguments
    give no text is no site."""
    sites = [s for s in sites_in_source(HELPER_EDGES, "pkg/edges.py", kinds=ALL_KINDS, helpers={}, calls=[])
             if s.template is not None and s.function == "callers"]
    # a helper that strips its argument raises it stripped; a generator's body runs only when
    # iterated; a `+` chain thousands deep is no helper, and the file's other sites stay
    assert [(s.line, s.template.pattern()) for s in sites] == [
        (26, r"Kernel build failed\n  Explanation:     the one-line reason given at this call"),
        (27, r"Kernel launch failed\n  Explanation: ([\s\S]+?)"),
        (29, r"bad config: the cache size is negative"),
    ]


CLASSES = '''
class TorchDynamoException(RuntimeError):
    pass

class ShortenTraceback(TorchDynamoException):
    def __init__(self, *args, first_useful_frame=None, **kwargs):
        super().__init__(*args, **kwargs)

class BackendCompilerFailed(ShortenTraceback):
    def __init__(self, backend_fn, inner_exception, first_useful_frame=None):
        self.backend_name = getattr(backend_fn, "__name__", "?")
        msg = f"backend={self.backend_name!r} raised:\\n{type(inner_exception).__name__}: {inner_exception}"
        super().__init__(msg, first_useful_frame=first_useful_frame)

class EngineDeadError(Exception):
    ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."

    def __init__(self, *args, suppress_context: bool = False, **kwargs):
        super().__init__(self.ENGINE_DEAD_MESSAGE, *args, **kwargs)

class PassedOnError(ValueError):
    def __init__(self, message):
        super().__init__(message)

class OldStyleError(Exception):
    def __init__(self, n):
        Exception.__init__(self, "the old style base call builds this message with %d things" % n)

class Printed(OldStyleError):
    def __str__(self):
        return f"an error class that prints its own message for {self.args}"

class Registry:
    def __init__(self):
        super().__init__("a class that is no exception builds no message here")

class RequestTimeout:
    def __str__(self):
        return f"RequestTimeout(seconds={self.seconds}, request id={self.request_id})"

class Failed:
    pass

class TestFailed(Failed):
    def __str__(self):
        return f"the summary of a test run that failed in {self.count} places"

class HandedOnError(Exception):
    def __init__(self, msg, /, *more, **fields):
        super().__init__(msg)

class StarredError(Exception):
    def __init__(self, *message):
        super().__init__(message)

class LockingError(Exception):
    def __init__(self):
        self.lock.__init__(self, "a lock's own initialiser is no message of this class")

def f():
    raise EngineDeadError()
'''


def test_a_message_an_exception_class_builds_is_a_site_of_the_class():
    """vLLM's EngineDeadError: every `raise EngineDeadError()` prints the text its __init__
    hands its base, which no raise site shows. The class builds it: a "factory" site in its
    __init__ (or __str__), also as a traceback prints it, after the class's name."""
    sites = {(s.template.pattern() if s.template else s.reason): s
             for s in sites_in_source(CLASSES, "exc.py", kinds=ALL_KINDS) if s.kind == "factory"}
    engine = sites[r"EngineCore encountered an issue\. See stack trace \(above\) for the root cause\."]
    assert (engine.function, engine.error_class, engine.line) == ("EngineDeadError.__init__", "EngineDeadError", 19)
    assert r"EngineDeadError: EngineCore encountered an issue\. See stack trace \(above\) for the root cause\." in sites
    # a local template, a class of this module's own hierarchy three levels down
    backend = sites[r"BackendCompilerFailed: backend=([\s\S]+?) raised:\n([\s\S]+?): ([\s\S]+?)"]
    assert (backend.function, backend.error_class) == ("BackendCompilerFailed.__init__", "BackendCompilerFailed")
    assert sites["the old style base call builds this message with (.+?) things"].error_class == "OldStyleError"
    assert sites["an error class that prints its own message for (.+?)"].function == "Printed.__str__"
    # a parameter handed on (positional-only, *args, **kwargs too) is the caller's message; a
    # class with no exception base builds none, whatever its name; a base's __init__ only
    assert not any(s.function.split(".")[0] in ("Registry", "PassedOnError", "RequestTimeout", "TestFailed",
                                                "HandedOnError", "StarredError", "LockingError")
                   for s in sites.values())
    assert len(sites) == 8


def test_a_deep_hostile_hierarchy_is_bounded():
    chain = "class E0(Exception):\n    pass\n" + "".join(f"class E{i}(E{i - 1}):\n    pass\n" for i in range(1, 3000))
    chain += "class E3000(E2999):\n    def __init__(self):\n        super().__init__('a message built by a class far down the chain')\n"
    # levels past the ones followed are not read: no recursion, no quadratic walk
    assert sites_in_source(chain, "deep.py", kinds=ALL_KINDS) == []


def test_a_message_collected_in_a_list_and_joined_gives_each_check_its_own():
    """vLLM's PEFTHelper.validate_legal appends one message per failed check and raises them
    joined: a user whose one check failed reads that item alone (fresh 8's LoRA rank paste)."""
    source = '''
class PEFTHelper:
    def validate_legal(self, lora_config):
        error_msg = self._validate_features()
        if self.r > lora_config.max_lora_rank:
            error_msg.append(
                f"LoRA rank {self.r} is greater than max_lora_rank"
                f" {lora_config.max_lora_rank}.")
        if self.bias != "none" and not lora_config.bias_enabled:
            error_msg.append("Adapter bias cannot be used without bias_enabled.")
        if error_msg:
            raise ValueError(f"{' '.join(error_msg)}")

def other(items):
    problems = ["the first problem of a list written out in full"]
    raise RuntimeError("; ".join(problems))
'''
    source += "def many(x):\n    errors = []\n" + "".join(
        f"    if x == {k}:\n        errors.append(f'option number {k} is not a valid choice for {{x}}')\n"
        for k in range(12)) + "    raise ValueError(' '.join(errors))\n"
    found = {(s.line, s.template.pattern()) for s in sites_in_source(source, "vllm/lora/peft_helper.py", kinds=ALL_KINDS)
             if s.template}
    # every item of a longer list, not only the first eight (review)
    assert {p for line, p in found if line > 17} == {f"option number {k} is not a valid choice for (.+?)" for k in range(12)}
    found = {(line, p) for line, p in found if line <= 17}
    assert found == {(12, r"LoRA rank (.+?) is greater than max_lora_rank (.+?)\."),
                     (12, r"Adapter bias cannot be used without bias_enabled\."),
                     (16, "the first problem of a list written out in full")}


def test_cpp_messages_built_with_fmt_format_and_c10ds_macros():
    """c10d's socket errors (fresh 7 and 9: "The client socket has timed out after 600000ms while
    trying to connect to (10.0.0.1, 29500).") are fmt::format strings: a format's replacement
    fields are values, "{{" a brace; C10D_THROW_ERROR names its class; C10D_ERROR and
    C10D_WARNING log a format and its values."""
    source = """
void SocketConnectOp::throwTimeoutError() const {
  auto msg = fmt::format(
      "The client socket has timed out after {} while trying to connect to ({}, {}).",
      opts_->connect_timeout(),
      host_,
      port_);

  C10D_ERROR(msg);

  C10D_THROW_ERROR(TimeoutError, msg);
}

bool SocketListenOp::tryListen(int family) {
    C10D_WARNING(
        "The server socket has failed to listen on {} (errno: {} - {}) {{braces}}.", addr, err.value(), err.message());
    C10D_THROW_ERROR(DistNetworkError, fmt::format("The server socket on {:>8} has timed out waiting {0}.", port_, x));
    TORCH_CHECK(false, fmt::format("value {:{}} is out of range for the given width", x, y));
    C10D_WARNING(unknown);
}
"""
    found = [(s.line, s.function, s.kind, s.error_class, s.template.pattern()) for s in cpp_sites(source, "socket.cpp")
             if s.template]
    timeout = r"The client socket has timed out after (.+?) while trying to connect to \((.+?), (.+?)\)\."
    assert found == [
        (9, "SocketConnectOp::throwTimeoutError", "log", "ERROR", timeout),
        (11, "SocketConnectOp::throwTimeoutError", "C++", "TimeoutError", timeout),
        (15, "SocketListenOp::tryListen", "log", "WARNING",
         r"The server socket has failed to listen on (.+?) \(errno: (.+?) - (.+?)\) \{braces\}\."),
        (17, "SocketListenOp::tryListen", "C++", "DistNetworkError",
         r"The server socket on (.+?) has timed out waiting (.+?)\."),
        (18, "SocketListenOp::tryListen", "C++", "RuntimeError", r"value (.+?) is out of range for the given width"),
    ]
    # a log macro whose message cannot be templated is still a log site, at its level (review)
    (unknown,) = [s for s in cpp_sites(source, "socket.cpp") if s.template is None]
    assert (unknown.line, unknown.kind, unknown.error_class) == (19, "log", "WARNING")


def _seconds(source: str) -> float:
    """The miner's best time of five on ``source``, the cyclic collector held off: what is
    measured is the miner's work (hundreds of thousands of sites make a large heap, and the
    collector's passes over it, growing with it, are not the miner's; under load they made
    the ratio below fail one run in a few)."""
    import gc
    import time

    best = float("inf")
    for _ in range(5):
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            sites_in_source(source, "hostile.py", kinds=ALL_KINDS)
            best = min(best, time.perf_counter() - started)
        finally:
            gc.enable()
    return best


def test_hostile_joined_lists_and_class_bodies_stay_linear():
    """A function of thousands of appends joined by as many raises, and an exception class of
    thousands of __init__s: each list is read once (and up to MAX_JOINED_ITEMS items), each
    class's methods once, so four times the code costs about four times the time, not sixteen."""
    def joined(n: int) -> str:
        body = "".join(f"    errors.append('the message number {k} of a long list of messages')\n" for k in range(n))
        body += "".join("    if errors:\n        raise ValueError(' '.join(errors))\n" for _ in range(n))
        return "def check():\n    errors = []\n" + body

    def inits(n: int) -> str:
        return "class ManyError(Exception):\n" + "".join(
            f"    def __init__(self):\n        super().__init__('built message number {k} of a long class body')\n"
            for k in range(n))

    def constants(n: int) -> str:  # a class's attributes, each read by its __init__ (review)
        return ("class ConstError(Exception):\n" + "".join(f"    A{k} = 'the class attribute message number {k}'\n"
                                                           for k in range(n))
                + "    def __init__(self):\n" + "".join(f"        super().__init__(self.A{k})\n" for k in range(n)))

    for make in (joined, inits, constants):
        small, large = _seconds(make(500)), _seconds(make(2000))
        assert large < small * 9, (make.__name__, small, large)


TORCH_CHECKS_SOURCE = '''
import torch
import torch._prims_common as utils
from torch._prims_common import check

def matmul_meta(a, b, dim):
    torch._check(a.dim() == 2, lambda: f"expected 2D tensor but got {a.dim()}D")
    torch._check_index(dim < 3, lambda: "index out of range for dim 0 of meta tensor")
    torch._check_with(ValueError, dim > 1, lambda: f"dim must be greater than one, got {dim}")
    utils.check(a.ndim == 3, lambda: "expected a batch of matrices here", exc_type=TypeError)
    check(a.ndim == 4, lambda: f"expected four dimensions for input, got {a.ndim}")
    msg = "the shapes cannot be multiplied together"
    torch._check(a.shape[1] == b.shape[0], lambda: msg)
    torch._check(a.shape[1] == b.shape[0])
    torch._check(a.shape[0] > 0, "not a callable: raises TypeError, not this text")
    other._check(a, lambda: "a method of that name on something else is not torch's")
    torch._check_with(error_type, dim > 2, lambda: "a class held in a variable is not known here")
'''


def test_torchs_checks_raise_their_lambdas_message_when_the_condition_fails():
    """torch._check(cond, lambda: msg) and its family (torch._check_index, _check_value,
    _check_type, _check_with, torch._prims_common.check before 2.1) raise the lambda's text
    when ``cond`` is false: thousands of torch's meta kernels and decompositions check so, and
    torch.compile users paste what they raise."""
    got = [(s.line, s.error_class, s.template.pattern(), s.condition) for s in
           sites_in_source(TORCH_CHECKS_SOURCE, "torch/_meta_registrations.py", kinds=ALL_KINDS) if s.template]
    assert got == [
        (7, "RuntimeError", "expected 2D tensor but got (.+?)D", "a.dim() != 2"),
        (8, "IndexError", "index out of range for dim 0 of meta tensor", "dim >= 3"),
        (9, "ValueError", "dim must be greater than one, got (.+?)", "dim <= 1"),
        (10, "TypeError", "expected a batch of matrices here", "a.ndim != 3"),
        (11, "RuntimeError", "expected four dimensions for input, got (.+?)", "a.ndim != 4"),
        (13, "RuntimeError", "the shapes cannot be multiplied together", "a.shape[1] != b.shape[0]"),
        (17, None, "a class held in a variable is not known here", "dim <= 2"),  # not "error_type" (review)
    ]


INDUCTOR_EXC = '''
from torch._dynamo.exc import ShortenTraceback
from torch._dynamo import exc
import torch.nn as nn

class GPUTooOldForTriton(ShortenTraceback):
    def __init__(self, device_props, first_useful_frame):
        super().__init__(
            f"Found {device_props.name} which is too old to be supported by the triton GPU compiler, "
            "which is used as the backend.",
            first_useful_frame=first_useful_frame,
        )

class Deeper(GPUTooOldForTriton):
    def __str__(self):
        return "a deeper message of the triton family here"

class ViaAttribute(exc.ShortenTraceback):
    def __init__(self):
        super().__init__("built through the attribute form of the base")

class NotAnError(nn.Module):
    def __init__(self):
        super().__init__("a module's name handed to its base is no message")
'''

DYNAMO_EXC = '''
class TorchDynamoException(RuntimeError):
    pass

class ShortenTraceback(TorchDynamoException):
    def __init__(self, *args, first_useful_frame, **kwargs):
        super().__init__(*args, **kwargs)
'''


def test_a_class_whose_exception_base_is_imported_builds_its_message_too(tmp_path):
    """torch 2.7 on raises "Found <GPU> which is too old to be supported by the triton GPU
    compiler" from torch._inductor.exc.GPUTooOldForTriton, whose base ShortenTraceback is
    imported from torch._dynamo.exc. Read across the release, the base is an exception class,
    so the message the class builds is a site (and its subclasses' too); a class whose
    imported base is none (nn.Module) builds no message."""
    import zipfile

    from errkb.mine.releases import LIBRARIES, read_release

    wheel = tmp_path / "torch-9.0.0-cp311-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/_inductor/exc.py", INDUCTOR_EXC)  # read before the module of its base
        zf.writestr("torch/_dynamo/exc.py", DYNAMO_EXC)
        zf.writestr("torch/nn/__init__.py", "class Module:\n    def __init__(self, name=None):\n        pass\n")
    rows = read_release(wheel, LIBRARIES["torch"], "9.0.0", commit="a" * 40).rows
    got = {(r["fn"], r["k"], r["e"], r["p"]) for r in rows}
    too_old = (r"Found (.+?) which is too old to be supported by the triton GPU compiler, "
               r"which is used as the backend\.")
    assert got == {
        ("GPUTooOldForTriton.__init__", "factory", "GPUTooOldForTriton", too_old),
        ("GPUTooOldForTriton.__init__", "factory", "GPUTooOldForTriton", "GPUTooOldForTriton: " + too_old),
        ("Deeper.__str__", "factory", "Deeper", "a deeper message of the triton family here"),
        ("Deeper.__str__", "factory", "Deeper", "Deeper: a deeper message of the triton family here"),
        ("ViaAttribute.__init__", "factory", "ViaAttribute", "built through the attribute form of the base"),
        ("ViaAttribute.__init__", "factory", "ViaAttribute", "ViaAttribute: built through the attribute form of the base"),
    }
    # read alone (errkb mine, drift), the module cannot tell: nothing is kept
    assert [s for s in sites_in_source(INDUCTOR_EXC, "torch/_inductor/exc.py", kinds=ALL_KINDS) if s.template] == []
