"""Part 1: profile torch.add(torch.matmul(x, w), b) with torch.profiler.

    uv run 01_matmul_add.py --size 64                        # overhead-bound; #2, the first recorded step, is wider
    uv run 01_matmul_add.py --size 64 --schedule 0,0,3       # the cold start: #0 is the first call
    uv run 01_matmul_add.py --size 4096 --warmup             # compute-bound
    uv run 01_matmul_add.py --size 4096 --warmup --compile   # one aten::addmm
    uv run 01_matmul_add.py --size 64 --batch 8              # aten::bmm instead of aten::mm

Writes traces/01_matmul_add/<size>_<dtype>_<warm>_<mode>.txt (the table) and .json (the trace).
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

from common.lesson import lesson_main, parser, positive_int, setup  # noqa: E402

cli = parser(__file__, __doc__, warmup_default=False)  # Part 1 starts cold
cli.add_argument("--size", type=positive_int, default=64, help="matrices are size x size (default: 64)")
cli.add_argument("--batch", type=positive_int, default=None,
                 help="add a leading batch axis of this length, so aten::matmul dispatches aten::bmm")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402


# 1. The workload: a matrix multiplication followed by a bias add.
def fn(x, w, b):
    return torch.add(torch.matmul(x, w), b)


@lesson_main
def main(args):
    batch = (args.batch,) if args.batch else ()
    n, copies = args.size, args.batch or 1
    lesson = setup(
        args,
        shape=(*batch, n),
        elements=5 * copies * n * n,  # x, w, b, the product, the sum
    )
    device, dtype = lesson.device, lesson.dtype

    x = torch.randn(*batch, n, n, device=device, dtype=dtype)
    w = torch.randn(*batch, n, n, device=device, dtype=dtype)
    b = torch.randn(*batch, n, n, device=device, dtype=dtype)

    compiled = torch.compile(fn, mode=args.compile_mode) if args.compile else fn

    # 2. One step, annotated so it is easy to find in the trace.
    def step():
        with torch.profiler.record_function("matmul_add"):
            return compiled(x, w, b)

    # 3. Optional warm-up: a few un-profiled calls pay the one-time costs (compilation, cuBLAS heuristics).
    lesson.warm_up(step)

    # Guess, then look: what one call of step() runs (each op's FLOPs and bytes), counted on fake tensors
    # before the profiler starts (no kernel runs); the report reads the workload from this count.
    lesson = lesson.counted(step)

    # 4. Profile: skip `wait` steps, run `warmup` steps unrecorded, record `active` steps. The first call's
    #    one-time costs land in the first `wait` step, unrecorded; the first recorded step is wider anyway
    #    (the profiler records each event for the first time there), warmed up or not.
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
                prof.step()  # tell the profiler a step ended: ProfilerStep#N in the trace

    # 5. Export: the profiler table (what takes the most time) and the trace (when and why).
    table = prof.key_averages().table(sort_by=lesson.sort_by, row_limit=args.row_limit)
    with lesson.writing() as (table_path, trace_path):  # both files or neither (after a device sync)
        table_path.write_text(table + "\n")
        prof.export_chrome_trace(str(trace_path))

    if args.compile and not lesson.check_close(step(), fn(x, w, b), "compiled output vs eager"):
        return 1
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
