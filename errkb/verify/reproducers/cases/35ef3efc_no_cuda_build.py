"""35ef3efc: moving a model to CUDA with a CPU-only torch build.

before: model.cuda() unconditionally; after: the device chosen from
torch.cuda.is_available(). The state's argv is the device the program asks for
("cuda", or "auto" = cuda when usable, else cpu): what the validation reads.
"""

STATES = {"before": {"argv": ["cuda"], "env": {}}, "after": {"argv": ["auto"], "env": {}}}


def trigger(state):
    import torch

    wanted = state["argv"][0]
    device = ("cuda" if torch.cuda.is_available() else "cpu") if wanted == "auto" else wanted
    model = torch.nn.Linear(4, 4).to(device)
    return f"model on {next(model.parameters()).device}"
