"""012b1dcb: torch.distributed used before init_process_group.

The states are the record's own program (errkb.verify.fixstates derives its 'before' from
its `# before:` line): dist.get_rank() with no process group before; a one-process gloo
group first after (torchrun's variables set by the program for a local run), its fixed
port 29500 replaced by a free one. The validation is given what each state's program
passes to init_process_group(), as a user runs it: nothing before (it never initialises);
after, the rendezvous its MASTER_ADDR/MASTER_PORT name (env:// from 127.0.0.1:29500, said
as tcp://127.0.0.1:29500), rank 0 and world size 1.
"""

MAPPING = {"python": True, "substitute": {"29500": "{port}"},
           "validation_argv": {"before": [],
                               "after": ["--init-method", "tcp://127.0.0.1:29500", "--rank", "0", "--world-size", "1"]}}


def trigger(state):
    from _program import run_distributed_program

    namespace, _ = run_distributed_program(state)
    return f"dist.get_rank() returned {namespace['rank']}"
