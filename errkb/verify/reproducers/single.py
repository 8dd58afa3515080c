"""The single-process reproducer driver: one record's case, one state, one process.

Run by verify inside the sandbox with the reproducer venv's interpreter:
``<venv python> -I single.py`` with a JSON config on stdin::

    {"case": "/abs/path/cases/xxx.py", "state": "before", "mode": "trigger" | "validate",
     "validation_code": "..."}

A case module (``cases/<id8>_<name>.py``) defines ``STATES`` — ``{"before": {"argv":
[...], "env": {...}}, "after": {...}}``: the user's broken and fixed setups, as the
command-line arguments and environment the user's program (and the record's
validation code) sees — and ``trigger(state)``, the user's program in that state, which
calls the real library. ``trigger`` may return a string saying what happened instead
of the error (shown in the proof).

``mode: trigger`` runs ``trigger`` with the state's environment applied; ``mode:
validate`` runs the record's validation code with ``sys.argv[1:]`` = the state's argv
and its environment applied, in a fresh process (so nothing the trigger left behind,
like an initialised process group, can make it pass). Either way the driver prints
one line, ``ERRKB-REPRODUCER-RESULT {json}``: whether it raised, the exception's class
and message, its frames (innermost last), the library versions.

Only the standard library is imported here; the case imports its library itself.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback

RESULT_PREFIX = "ERRKB-REPRODUCER-RESULT "
VERSION_OF = ("torch", "vllm", "flashinfer", "transformers")


def _versions() -> dict:
    out = {}
    for name in VERSION_OF:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__version__", None):
            out[name] = str(module.__version__)
    return out


def _exception(e: BaseException) -> dict:
    frames = [{"file": f.filename, "line": f.lineno, "function": f.name} for f in traceback.extract_tb(e.__traceback__)]
    # A case whose program raises in a child process (which only prints it) re-raises the
    # child's error carrying the child's own frames: the raise site is judged on those.
    child_frames = getattr(e, "errkb_frames", None)
    return {
        "raised": True,
        "exception_class": type(e).__name__,
        "exception_message": str(e),
        "frames": (child_frames if isinstance(child_frames, list) and child_frames else frames)[-12:],
        "traceback": traceback.format_exc()[-4000:],
    }


def main(config: dict) -> dict:
    path = config["case"]
    sys.path.insert(0, os.path.dirname(path))  # a case may import its family's helper (cases/_*.py)
    spec = importlib.util.spec_from_file_location("_errkb_case", path)
    case = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(case)
    state_name = config["state"]
    # The record's own state, mapped by the case on the host (errkb.verify.fixstates), or,
    # for a case not yet converted, its literal STATES.
    state = config.get("state_value") or case.STATES[state_name]
    if hasattr(case, "setup"):
        case.setup(state)  # e.g. write the tiny model folder the state's argv names, in the working folder
    os.environ.update(state.get("env", {}))
    result: dict = {"state": state_name, "mode": config["mode"], "argv": state.get("argv", []), "env": state.get("env", {})}
    if config["mode"] == "trigger":
        try:
            note = case.trigger(state)
            result.update(raised=False, note=None if note is None else str(note)[:1000])
        except Exception as e:
            result.update(_exception(e))
    else:
        code = config.get("validation_code") or ""
        sys.argv = ["validation", *state.get("argv", [])]
        try:
            exec(compile(code, "<validationCode>", "exec"), {"__name__": "__main__"})
            result.update(raised=False)
        except SystemExit as e:
            if e.code in (None, 0):
                result.update(raised=False)
            else:
                result.update(_exception(e))
                result["exception_message"] = str(e.code)
        except Exception as e:
            result.update(_exception(e))
    result["versions"] = _versions()
    return result


if __name__ == "__main__":
    cfg = json.loads(sys.stdin.read() or "{}")
    result = main(cfg)
    # On a line of its own, whatever the library printed without a newline before it.
    print("\n" + RESULT_PREFIX + json.dumps(result), flush=True)
