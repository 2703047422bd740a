"""Part 2: profile one nn.Linear(in_dim, out_dim, bias=True) forward.

    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64             # aten::linear -> aten::t + aten::addmm
    uv run 02_linear.py --batch 1024 --in_dim 32 --out_dim 64 --compile   # same aten::addmm, plus compile frames

Writes traces/02_linear/<batch>x<in_dim>x<out_dim>_<dtype>_<warm>_<mode>.txt and .json.
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

from common.lesson import lesson_main, parser, positive_int, setup  # noqa: E402

cli = parser(__file__, __doc__, warmup_default=True)  # Part 2 warms up by default
cli.add_argument("--batch", type=positive_int, default=1024, help="rows of the input (default: 1024)")
cli.add_argument("--in_dim", type=positive_int, default=32, help="input features (default: 32)")
cli.add_argument("--out_dim", type=positive_int, default=64, help="output features (default: 64)")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402
from torch import nn  # noqa: E402


@lesson_main
def main(args):
    rows, fan_in, fan_out = args.batch, args.in_dim, args.out_dim
    lesson = setup(
        args,
        shape=(rows, fan_in, fan_out),
        # x, the weight, the bias, the output (and the compiled path's copy of it)
        elements=rows * fan_in + fan_in * fan_out + fan_out + 2 * rows * fan_out,
    )
    device, dtype = lesson.device, lesson.dtype

    # 1. The workload: y = x @ w.T + b, the bias folded into the GEMM (aten::addmm).
    model = nn.Linear(args.in_dim, args.out_dim, bias=True).to(device=device, dtype=dtype).eval()
    x = torch.randn(args.batch, args.in_dim, device=device, dtype=dtype)

    compiled = torch.compile(model, mode=args.compile_mode) if args.compile else model

    # 2. One forward, without autograd, annotated so it is easy to find in the trace.
    def step():
        with torch.no_grad(), torch.profiler.record_function("linear_fwd"):
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
