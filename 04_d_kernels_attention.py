"""Part 3: FlashAttention-2 as a hand-built kernel from the Hugging Face Hub. Needs CUDA.

    uv run 04_d_kernels_attention.py                    # the post's shape: 8 x 1024 tokens x 16 heads x 64

kernels.get_kernel("kernels-community/flash-attn2") downloads a prebuilt FlashAttention-2 for your
GPU and torch; flash_attn_func takes q, k, v as [batch, seq, heads, head_dim] (SDPA's layout,
[batch, heads, seq, head_dim], transposed). Without a GPU or the Hub, 04_c_sdpa_attention.py
--backend flash profiles PyTorch's own fused flash attention.
Writes traces/04_d_kernels_attention/<batch>x<heads>x<seq>x<head_dim>_<dtype>_<warm>_<mode>.txt and .json.
"""

import functools

from common import attention
from common.errors import fail
from common.guess import FUSED_ATTENTION, guess
from common.lesson import lesson_main, parser, setup

FLASH_HUB_REPO = "kernels-community/flash-attn2"
FLASH_HUB_VERSION = 3  # pinned, as in the post: a new kernel version on the Hub must not change the lesson silently

cli = parser(__file__, __doc__, warmup_default=True)
attention.add_shape_flags(cli)

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def load_flash_attn():
    """The Hub's FlashAttention-2 (version pinned); one line that says what to do when the Hub is out of reach."""
    try:
        from kernels import get_kernel

        return get_kernel(FLASH_HUB_REPO, version=FLASH_HUB_VERSION)
    except Exception as exc:  # no network, no Hub, no build for this GPU or torch: all end the same way
        fail(f"could not load {FLASH_HUB_REPO} (version {FLASH_HUB_VERSION}) from the Hugging Face Hub "
             f"({type(exc).__name__}); without Hub access, profile PyTorch's own FlashAttention-2: "
             "uv run 04_c_sdpa_attention.py --backend flash")


# Guess first, then look: one flash kernel per forward, as SDPA's flash backend showed.
GUESS = guess("kernels_attn_fwd", "Part 3: one fused flash kernel per forward", ("one flash attention kernel",
              FUSED_ATTENTION + ("flash_attn::fwd", "_flash_attn_forward", "flash_attn_2::fwd")))


@lesson_main
def main(args):
    lesson = setup(args, shape=attention.shape(args), elements=2 * attention.elements(args, scores=0), guess=GUESS,
                   needs_cuda="the Hub's FlashAttention-2 is built for NVIDIA GPUs. Without a GPU, see the CPU's "
                              "fused flash attention: uv run 04_c_sdpa_attention.py --backend flash")
    device, dtype = lesson.device, lesson.dtype

    # 1. The workload: flash_attn_func on [batch, seq, heads, head_dim], causal.
    flash = load_flash_attn()
    q, k, v = (torch.randn(args.batch, args.seq, args.heads, args.head_dim, device=device, dtype=dtype)
               for _ in range(3))

    # Before profiling: does the Hub kernel give SDPA's answer? (SDPA wants [batch, heads, seq, head_dim].)
    with torch.no_grad():
        want = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
        if not lesson.check_close(flash.flash_attn_func(q, k, v, causal=True), want.transpose(1, 2),
                                  "Hub FlashAttention-2 vs SDPA"):
            return 1

    def attend(q, k, v):
        return flash.flash_attn_func(q, k, v, causal=True)

    def sdpa_attend(q, k, v):  # the same causal attention by SDPA, on SDPA's layout
        return F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)

    compiled = torch.compile(attend, mode=args.compile_mode) if args.compile else attend

    # 2. One forward, without autograd, annotated.
    def step(attention_fn=compiled):
        with torch.no_grad(), torch.profiler.record_function("kernels_attn_fwd"):
            return attention_fn(q, k, v)

    # 3. Warm-up (on by default here; --no-warmup profiles cold): un-profiled calls of step(), then a sync.
    lesson.warm_up(step)
    # Guess, then look: one forward's work, counted on fake tensors through SDPA's causal attention (the same
    # operation: the Hub's kernel cannot run on fake tensors)
    lesson = lesson.counted(functools.partial(step, sdpa_attend), stand_in="through SDPA's causal attention")

    # 4. Profile with a wait/warmup/active schedule, one prof.step() per forward.
    s = args.schedule
    with lesson.profiling():  # a status line: which step runs, about how long is left
        with torch.profiler.profile(
            activities=lesson.activities,  # CPU and CUDA
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
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
