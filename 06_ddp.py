"""Beyond one process: profile DistributedDataParallel training, one trace per rank.

    uv run torchrun --standalone --nproc-per-node 2 06_ddp.py                        # gloo on the CPU, NCCL on GPUs
    uv run torchrun --standalone --nproc-per-node 2 06_ddp.py --bucket-cap-mb 1      # more, smaller all-reduces
    uv run torchrun --standalone --nproc-per-node 2 06_ddp.py --straggler 1 --delay-ms 50   # rank 0 waits for rank 1

A few GeGLU MLP blocks of 03_simple_mlp.py, trained with DDP: in the backward, DDP all-reduces
each gradient bucket as soon as its gradients are ready, so communication can hide behind the rest
of the backward. Every rank writes traces/06_ddp/<tag>_rank<k>.txt and .json; rank 0 prints the
console and, at the end, the report over every rank's trace.
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

from common.lesson import add_mlp_shape_flags, parser, positive_float, positive_int, sized_for  # noqa: E402

cli = parser(__file__, __doc__, warmup_default=True)
# On a CPU the post's sizes take seconds a step, and a 50 ms straggler would hide in the step-to-step noise:
# a CPU run takes these sizes where none is given (a step of about a tenth of a second).
add_mlp_shape_flags(cli, batch=8, per_rank=True, cpu=dict(batch=2, seq=64, dim=256, hidden=1024))
cli.add_argument("--blocks", type=positive_int, default=4, help="MLP blocks in the model (default: 4)")
cli.add_argument("--bucket-cap-mb", type=positive_float, default=None, metavar="MB",
                 help="DDP's gradient bucket size: how many all-reduces per step (default: DDP's, 25 MB "
                      "with a 1 MB first bucket)")
cli.add_argument("--straggler", type=int, default=None, metavar="RANK",
                 help="make this rank sleep --delay-ms every step, so the others wait for it in the all-reduce")
cli.add_argument("--delay-ms", type=positive_float, default=None, metavar="D",
                 help="the straggler's delay per step in ms (default with --straggler: 50)")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here (rank 0 only), before torch's import

import functools  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from common.distributed import ddp_main, setup_ddp  # noqa: E402


# 1. The workload: the GeGLU MLP of 03_simple_mlp.py, a few blocks deep.
class GeGLUMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def ddp_variants(bucket_cap_mb, straggler, delay_ms):
    """The knobs of this lesson that change the trace, for the file name (none at their defaults)."""
    out = []
    if bucket_cap_mb is not None:
        out.append(("bucket", f"{bucket_cap_mb:g}"))
    if straggler is not None:
        out.append(("straggler", f"{straggler}-{delay_ms:g}"))
    return out


def check_straggler(straggler, delay_ms, world_size):
    """--straggler names a rank of this job; --delay-ms needs a straggler."""
    if delay_ms is not None and straggler is None:
        cli.error("--delay-ms needs --straggler RANK")
    if straggler is not None and not 0 <= straggler < world_size:
        cli.error(f"--straggler {straggler}: the ranks of this job are 0..{world_size - 1}")


@ddp_main
def main(args):
    args = sized_for(args, on_cpu=args.device == "cpu" or not torch.cuda.is_available())
    delay_ms = args.delay_ms if args.delay_ms is not None else 50.0  # the straggler's delay per step
    tokens, dim, hidden, blocks = args.batch * args.seq, args.dim, args.hidden, args.blocks
    lesson = setup_ddp(
        args,
        shape=(args.batch, args.seq, dim, hidden, blocks),
        # weights, gradients and DDP's bucket copies, plus each block's [tokens, hidden] activations
        elements=blocks * (3 * 3 * dim * hidden + 4 * tokens * hidden + 2 * tokens * dim),
        variants=ddp_variants(args.bucket_cap_mb, args.straggler, delay_ms),
        check=functools.partial(check_straggler, args.straggler, args.delay_ms),
    )
    device, dtype, rank = lesson.device, lesson.dtype, lesson.ranks.rank

    torch.manual_seed(0)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
    model = nn.Sequential(*[GeGLUMLP(args.dim, args.hidden) for _ in range(args.blocks)]).to(device=device, dtype=dtype)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None, bucket_cap_mb=args.bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    torch.manual_seed(1 + rank)  # each rank trains on its own batch
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)
    y = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)

    compiled = torch.compile(ddp, mode=args.compile_mode) if args.compile else ddp

    # 2. One training step, annotated: forward, backward (with DDP's all-reduces), optimizer step.
    def step(net=compiled):
        if rank == args.straggler:  # --straggler: this rank arrives late at every all-reduce
            with torch.profiler.record_function("straggler_delay"):
                time.sleep(delay_ms / 1000)
        with torch.profiler.record_function("forward"):
            loss = F.mse_loss(net(x), y)
        with torch.profiler.record_function("backward"):
            loss.backward()  # DDP all-reduces each gradient bucket once its gradients are ready
        with torch.profiler.record_function("optimizer_step"):
            opt.step()
            opt.zero_grad(set_to_none=True)

    # 3. Warm-up: DDP rebuilds its buckets after the first step (and compiles, with --compile).
    lesson.warm_up(step)
    # Guess, then look: one step's work (forward, backward, optimizer), counted on fake tensors through the
    # bare model, as DDP's all-reduces need real ones; nothing real changes
    lesson = lesson.counted(functools.partial(step, model))

    # 4. Profile: every rank runs the same schedule and records its own trace.
    s = args.schedule
    with lesson.profiling():  # a status line: which step runs, about how long is left
        with torch.profiler.profile(
            activities=lesson.activities,  # CPU, plus CUDA on a GPU
            schedule=torch.profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active, repeat=s.repeat),
            record_shapes=args.record_shapes,
            profile_memory=args.profile_memory,
            with_stack=args.with_stack,
        ) as prof:
            lesson.label(prof)  # once: the run's knobs (and the rank) into the trace's metadata
            for _ in range(s.steps):
                step()
                prof.step()

    # 5. Export this rank's table and trace (every rank's files appear together).
    table = prof.key_averages().table(sort_by=lesson.sort_by, row_limit=args.row_limit)
    with lesson.writing() as (table_path, trace_path):  # both files or neither (after a device sync)
        table_path.write_text(table + "\n")
        prof.export_chrome_trace(str(trace_path))

    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
