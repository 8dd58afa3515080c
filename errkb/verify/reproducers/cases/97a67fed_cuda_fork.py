"""97a67fed (GPU): CUDA used in the parent, then in a child started with 'fork'.

Each state is the record's exampleFix program, written to ``prog.py`` and run as a script
(``python prog.py``), as the user runs it: a 'spawn' child re-imports the script by its path,
so the program must be a file, not code run inside the driver. "after" is the fix as written
(``mp.get_context("spawn")``); "before" puts its ``# before:`` line back
(``mp.Process(target=work, args=(0,)).start()``, Linux's default 'fork').

Mapping, shown here and in the proof: the parent touches CUDA before it starts the child
(``torch.zeros(1, device="cuda")``), the cause the record's triggerScenarios name; a parent
that never touched CUDA can fork a CUDA child safely, so without it neither state raises.
The child's error is printed by the child and never reaches the parent (whose exit status
stays 0): the trigger reads the child's traceback and raises its class and message with the
child's own frames. The state's argv is the start method, what the validation reads.
"""

STATES = {"before": {"argv": ["fork"], "env": {}}, "after": {"argv": ["spawn"], "env": {}}}

_HEAD = '''import torch.multiprocessing as mp


def work(rank):
    import torch
    torch.zeros(1, device=f"cuda:{rank}")


if __name__ == "__main__":
    import torch
    torch.zeros(1, device="cuda")  # mapping: the parent uses CUDA first
'''
PROGRAMS = {
    "fork": _HEAD + '''    p = mp.Process(target=work, args=(0,))  # before: default 'fork' on Linux
    p.start()
    p.join()
    raise SystemExit(p.exitcode)
''',
    "spawn": _HEAD + '''    ctx = mp.get_context("spawn")  # after
    p = ctx.Process(target=work, args=(0,))
    p.start()
    p.join()
    raise SystemExit(p.exitcode)
''',
}


def _child_error(stderr: str):
    """The exception of the last traceback a child printed, with its frames (innermost last)."""
    import re

    start = stderr.rfind("Traceback (most recent call last):")
    if start < 0:
        return None
    block = stderr[start:]
    frames = [{"file": f, "line": int(n), "function": fn.strip()}
              for f, n, fn in re.findall(r'^\s*File "([^"]*)", line (\d+), in (.+)$', block, re.M)]
    last = next((ln for ln in reversed(block.splitlines()) if re.match(r"^[A-Za-z_][\w.]*(: |$)", ln)), None)
    if last is None:
        return None
    name, _, message = last.partition(": ")
    base = getattr(__import__("builtins"), name.rsplit(".", 1)[-1], None)
    cls = type(name.rsplit(".", 1)[-1], (base if isinstance(base, type) and issubclass(base, Exception) else Exception,), {})
    error = cls(message)
    error.errkb_frames = frames  # single.py reports these instead of this function's own
    return error


def trigger(state):
    import subprocess
    import sys

    method = state["argv"][0]
    with open("prog.py", "w") as f:
        f.write(PROGRAMS[method])
    res = subprocess.run([sys.executable, "prog.py"], capture_output=True, text=True, timeout=240)
    error = _child_error(res.stderr)
    if error is not None:
        raise error
    if res.returncode != 0:
        raise RuntimeError(f"prog.py exited with status {res.returncode}: {res.stderr[-1500:]}")
    return f"prog.py ({method}): the child used CUDA; exit status 0"
