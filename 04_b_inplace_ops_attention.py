"""Part 3: the naive attention of 04_a_naive_attention.py with the mask applied in place (masked_fill_).

    uv run 04_b_inplace_ops_attention.py                # the post's shape: 8 x 16 heads x 1024 tokens x 64

One line changes: scores.masked_fill(mask, -inf) becomes scores.masked_fill_(mask, -inf), so the
copy 04_a makes is gone (the Memcpy on the GPU; aten::clone -> aten::copy_ on the CPU). Safe here
because the forward runs under torch.no_grad(): no backward pass needs the scores it overwrites.
Writes traces/04_b_inplace_ops_attention/<batch>x<heads>x<seq>x<head_dim>_<dtype>_<warm>_<mode>.txt and .json.
"""

from common import attention
from common.guess import MASKED_FILL, MATMUL, SOFTMAX, guess
from common.lesson import lesson_main, parser, setup

cli = parser(__file__, __doc__, warmup_default=True)
attention.add_shape_flags(cli)

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import math  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402


# 1. The workload: 04_a's attention, with the scale and the mask written as the post's diff does.
class NaiveCausalAttention(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k, v, mask):
        scores = torch.matmul(q, k.transpose(-2, -1))  # [batch, heads, seq, seq]
        scores = torch.mul(scores, self.scale)
        scores.masked_fill_(mask, float("-inf"))  # in place: the trailing underscore, no copy
        attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]
        return out


# Guess first, then look: what the post expects one forward to run (the report lines it up with what ran).
GUESS = guess("attn_fwd", "Part 3: 'a matmul kernel, a mul kernel, an operation for the masking, a softmax "
              "kernel, a matmul kernel'",
              ("matmul q @ k.T", MATMUL), ("mul (the scale)", "aten::mul"), ("the causal mask", MASKED_FILL),
              ("softmax", SOFTMAX), ("matmul attn @ v", MATMUL))


@lesson_main
def main(args):
    lesson = setup(args, shape=attention.shape(args), elements=attention.elements(args, scores=3),
                   guess=GUESS)
    device, dtype = lesson.device, lesson.dtype

    q, k, v = (torch.randn(args.batch, args.heads, args.seq, args.head_dim, device=device, dtype=dtype)
               for _ in range(3))
    # the causal mask, built once and reused: True above the diagonal (a token must not see later ones)
    mask = torch.triu(torch.ones(args.seq, args.seq, dtype=torch.bool, device=device), diagonal=1)
    model = NaiveCausalAttention(args.head_dim).eval()

    compiled = torch.compile(model, mode=args.compile_mode) if args.compile else model

    # 2. One forward, without autograd, annotated as in the post.
    def step():
        with torch.no_grad(), torch.profiler.record_function("attn_fwd"):
            return compiled(q, k, v, mask)

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
            if not lesson.check_close(step(), model(q, k, v, mask), "compiled output vs eager"):
                return 1
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
