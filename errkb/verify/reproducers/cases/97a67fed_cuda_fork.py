"""97a67fed (GPU): CUDA used in the parent, then in a child started with 'fork'.

The state's argv is the start method the program uses (what the validation reads).
"""

STATES = {"before": {"argv": ["fork"], "env": {}}, "after": {"argv": ["spawn"], "env": {}}}


def _work(queue):
    import torch

    try:
        torch.zeros(1, device="cuda")
        queue.put(None)
    except Exception as e:
        queue.put((type(e).__name__, str(e)))


def trigger(state):
    import multiprocessing as mp

    import torch

    torch.zeros(1, device="cuda")  # the parent initialises CUDA first
    ctx = mp.get_context(state["argv"][0])
    queue = ctx.Queue()
    child = ctx.Process(target=_work, args=(queue,))
    child.start()
    got = queue.get(timeout=120)
    child.join(timeout=60)
    if got:
        raise RuntimeError(got[1])
    return "the child used CUDA"
