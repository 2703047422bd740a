"""Part 3: profile F.scaled_dot_product_attention, one backend at a time.

    uv run 04_c_sdpa_attention.py --backend math        # the reference: attention in primitive ops
    uv run 04_c_sdpa_attention.py --backend flash       # one fused kernel (FlashAttention-2 on a GPU)
    uv run 04_c_sdpa_attention.py --backend efficient   # one fused kernel (xformers' CUTLASS; GPU only)
    uv run 04_c_sdpa_attention.py --backend cudnn       # one generated kernel (cuDNN; GPU only)
    uv run 04_c_sdpa_attention.py --backend auto        # let SDPA choose

SDPA dispatches to one of several backends; torch.nn.attention.sdpa_kernel pins one, so each can be
profiled on its own. On the CPU SDPA has math and flash (a fused C++ kernel); efficient and cudnn
are CUDA kernels.
Writes traces/04_c_sdpa_attention/<batch>x<heads>x<seq>x<head_dim>_<dtype>_<warm>_<mode>_backend-<name>.txt and .json.
"""

from common import attention
from common.guess import FUSED_ATTENTION, guess
from common.lesson import lesson_main, parser, setup

cli = parser(__file__, __doc__, warmup_default=True)
attention.add_shape_flags(cli)
cli.add_argument("--backend", choices=list(attention.BACKENDS), default="auto",
                 help="the SDPA backend to pin with sdpa_kernel (default: auto, SDPA chooses)")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import contextlib  # noqa: E402
import functools  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402


# 1. The workload: one call replaces the hand-written module; is_causal=True replaces the mask.
def attend(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


# Guess first, then look: the post expects the one-liner to make the trace "simpler and faster:
# fewer kernels, less CPU dispatch, maybe even a fused kernel".
GUESS = guess("sdpa_fwd", "Part 3: 'simpler and faster. Fewer kernels, less CPU dispatch, maybe even a fused "
              "kernel'", ("one fused attention kernel", FUSED_ATTENTION))


@lesson_main
def main(args):
    lesson = setup(args, shape=attention.shape(args),
                   elements=attention.elements(args, scores=6 if args.backend in ("math", "auto") else 0),
                   variants=[("backend", args.backend)], guess=GUESS,
                   check=functools.partial(attention.check_device, args.backend))
    device, dtype = lesson.device, lesson.dtype

    q, k, v = (torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=device, dtype=dtype)
               for _ in range(3))
    attention.check_backend(args.backend, device, q, k, v)  # a GPU that cannot run it: one line, exit 2
    # pin the backend (auto: every backend allowed, SDPA picks the fastest that supports the inputs)
    backend = attention.BACKENDS[args.backend]
    pinned = (lambda: sdpa_kernel(getattr(SDPBackend, backend))) if backend else contextlib.nullcontext

    compiled = torch.compile(attend, mode=args.compile_mode) if args.compile else attend

    # 2. One forward, without autograd, annotated (the post's table calls it the "*_fwd" op).
    def step():
        with torch.no_grad(), pinned(), torch.profiler.record_function("sdpa_fwd"):
            return compiled(q, k, v)

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
        with torch.no_grad(), pinned():
            if not lesson.check_close(step(), attend(q, k, v), "compiled output vs eager"):
                return 1
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
