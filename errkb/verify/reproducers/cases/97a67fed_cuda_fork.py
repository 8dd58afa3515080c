"""97a67fed (GPU): CUDA used in the parent, then in a child started with 'fork'.

The states are the record's exampleFix program (errkb.verify.fixstates derives its 'before'
from its own ``# before:`` line: ``ctx = mp.get_context("fork")``, Linux's default start
method, in place of the ``mp.get_context("spawn")`` marked ``# after``), written to ``prog.py``
and run as a script (``python prog.py``), as the user runs it: a 'spawn' child re-imports the
script by its path, so the program must be a file, not code run inside the driver. The
validation is given the start method each state's program names (``argv_from``), what it reads.

Mapping, shown here and in the proof: the parent touches CUDA before it starts the child
(``torch.zeros(1, device="cuda")`` on the ``p.start()`` line), the cause the record's
triggerScenarios name; a parent that never touched CUDA can fork a CUDA child safely, so
without it neither state raises. The parent exits with the child's status (on the ``p.join()``
line): the child's error is printed by the child and never reaches the parent, so the trigger
reads the child's traceback and raises its class and message with the child's own frames.
Both substitutions keep each line in its place, so the lines the fix changes are the lines the
mapped states change (errkb.verify.fixstates.map_states checks it).
"""

MAPPING = {
    "python": True,
    "argv_from": r'get_context\("(\w+)"\)',
    "substitute": {
        "    p.start()": '    import torch; torch.zeros(1, device="cuda"); p.start()  # mapping: the parent uses CUDA first',
        "    p.join()": "    p.join(); raise SystemExit(p.exitcode)  # mapping: the child's status",
    },
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

    with open("prog.py", "w") as f:
        f.write(state["program"])
    res = subprocess.run([sys.executable, "prog.py"], capture_output=True, text=True, timeout=240)
    error = _child_error(res.stderr)
    if error is not None:
        raise error
    if res.returncode != 0:
        raise RuntimeError(f"prog.py exited with status {res.returncode}: {res.stderr[-1500:]}")
    return f"prog.py ({' '.join(state.get('argv', []))}): the child used CUDA; exit status 0"
