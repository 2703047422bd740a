"""Part 2: profile a GeGLU MLP, eager and compiled.

    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072             # 3 GEMMs + gelu + mul
    uv run 03_simple_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072 --compile   # gelu*mul fused into one kernel

On the CPU the fused kernel shows as graph_0_cpp_fused__unsafe_view_gelu_mul_0 (Inductor's
cpp.enable_kernel_profile is switched on for compiled CPU runs).
Writes traces/03_simple_mlp/<batch>x<seq>x<dim>x<hidden>_<dtype>_<warm>_<mode>.txt and .json.
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

from common.lesson import add_mlp_shape_flags, lesson_main, parser, setup  # noqa: E402

cli = parser(__file__, __doc__, warmup_default=True)
add_mlp_shape_flags(cli)

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


# 1. The workload: down(gelu_tanh(gate(x)) * up(x)), three bias-free projections.
class GeGLUMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


@lesson_main
def main(args):
    tokens, dim, hidden = args.batch * args.seq, args.dim, args.hidden
    lesson = setup(
        args,
        shape=(args.batch, args.seq, dim, hidden),
        # x and the output, three weights, and the [tokens, hidden] intermediates alive at once
        elements=2 * tokens * dim + 3 * dim * hidden + 4 * tokens * hidden,
    )
    device, dtype = lesson.device, lesson.dtype

    model = GeGLUMLP(args.dim, args.hidden).to(device=device, dtype=dtype).eval()
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)

    compiled = torch.compile(model, mode=args.compile_mode) if args.compile else model

    # 2. One forward, without autograd, annotated so it is easy to find in the trace.
    def step():
        with torch.no_grad(), torch.profiler.record_function("mlp_fwd"):
            return compiled(x)

    # 3. Warm-up (on by default here; --no-warmup profiles cold): un-profiled calls of step(), then a sync.
    lesson.warm_up(step)

    # Guess, then look: what one call of step() runs (each op's FLOPs and bytes), counted on fake tensors
    # before the profiler starts (no kernel runs); the report reads the workload from this count.
    lesson = lesson.counted(step)

    # 4. Profile with a wait/warmup/active schedule, one prof.step() per forward.
    s = args.schedule
    with lesson.profiling():  # a status line: which step runs, about how long is left
        with torch.profiler.profile(
            activities=lesson.activities,  # CPU, plus CUDA on a GPU
            schedule=torch.profiler.schedule(wait=s.wait, warmup=s.warmup, active=s.active, repeat=s.repeat),
            record_shapes=args.record_shapes,
            profile_memory=args.profile_memory,
            with_stack=args.with_stack,
        ) as prof:
            lesson.label(prof)  # once: the run's knobs into the trace's metadata, for the report
            for _ in range(s.steps):
                step()
                prof.step()

    # 5. Export: the profiler table (what takes the most time) and the trace (when and why).
    table = prof.key_averages().table(sort_by=lesson.sort_by, row_limit=args.row_limit)
    with lesson.writing() as (table_path, trace_path):  # both files or neither (after a device sync)
        table_path.write_text(table + "\n")
        prof.export_chrome_trace(str(trace_path))

    if args.compile:
        with torch.no_grad():
            if not lesson.check_close(step(), model(x), "compiled output vs eager"):
                return 1
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
