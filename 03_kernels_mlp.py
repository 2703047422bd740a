"""Part 2: the same GeGLU MLP with a hand-tuned fused kernel (Liger's GeGLU, Triton). Needs CUDA.

    uv run 03_kernels_mlp.py --batch 64 --seq 128 --dim 768 --hidden 3072                 # from the Hub
    uv run --extra liger 03_kernels_mlp.py --source pip                                    # from PyPI

--source hub (the post's way) loads LigerGEGLUMLP with kernels.get_kernel() from the Hugging Face
Hub; --source pip imports it from the liger-kernel package, for machines without Hub access.
Writes traces/03_kernels_mlp/<batch>x<seq>x<dim>x<hidden>_<dtype>_<warm>_<mode>.txt and .json.
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

import functools  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from common.errors import fail  # noqa: E402
from common.lesson import add_mlp_shape_flags, lesson_main, parser, setup  # noqa: E402

LIGER_HUB_REPO = "kernels-community/liger-kernels"
LIGER_HUB_VERSION = 1  # pinned: a new kernel version on the Hub must not change the lesson silently

cli = parser(__file__, __doc__, warmup_default=True)
add_mlp_shape_flags(cli)
cli.add_argument("--source", choices=("hub", "pip"), default="hub",
                 help="hub: kernels.get_kernel from the Hugging Face Hub (default); pip: the liger-kernel package")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402


# The plain PyTorch MLP of 03_simple_mlp.py, to check the fused kernel's answer against.
class GeGLUMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down_proj(F.gelu(self.gate_proj(x), approximate="tanh") * self.up_proj(x))


def load_liger_geglu_mlp(source):
    """LigerGEGLUMLP: three nn.Linear and one fused Triton GeLU*mul kernel (LigerGELUMulFunction)."""
    if source == "hub":
        try:
            from kernels import get_kernel

            liger = get_kernel(LIGER_HUB_REPO, version=LIGER_HUB_VERSION)
        except Exception as exc:  # no network, no Hub, no such version: all end the same way
            fail(f"could not load {LIGER_HUB_REPO} (version {LIGER_HUB_VERSION}) from the Hugging Face Hub "
                 f"({type(exc).__name__}); without Hub access use --source pip")
        return liger.layers.LigerGEGLUMLP
    try:
        from liger_kernel.transformers import LigerGEGLUMLP
    except ImportError:
        fail("--source pip needs the liger-kernel package: run with `uv run --extra liger 03_kernels_mlp.py "
             "--source pip` (or `uv sync --extra liger`)")
    return LigerGEGLUMLP


@lesson_main
def main(args):
    tokens, dim, hidden = args.batch * args.seq, args.dim, args.hidden
    lesson = setup(
        args,
        shape=(args.batch, args.seq, dim, hidden),
        # two models (Liger's and the plain one): x, the output and three weights each; the intermediates
        elements=2 * (2 * tokens * dim + 3 * dim * hidden) + 4 * tokens * hidden,
        needs_cuda="the hand-tuned Liger kernel is written in Triton for GPUs. Without a GPU, see the fused "
                   "kernel Inductor writes for the CPU: uv run 03_simple_mlp.py --compile",
    )
    device, dtype = lesson.device, lesson.dtype

    # 1. The workload: Liger's GeGLU MLP, with the same weights as the plain PyTorch MLP.
    LigerGEGLUMLP = load_liger_geglu_mlp(args.source)
    config = SimpleNamespace(hidden_size=args.dim, intermediate_size=args.hidden, hidden_act="gelu_pytorch_tanh")
    model = LigerGEGLUMLP(config).to(device=device, dtype=dtype).eval()
    reference = GeGLUMLP(args.dim, args.hidden).to(device=device, dtype=dtype).eval()
    model.load_state_dict(reference.state_dict())
    x = torch.randn(args.batch, args.seq, args.dim, device=device, dtype=dtype)

    # Before profiling: does the fused kernel give the plain MLP's answer?
    with torch.no_grad():
        if not lesson.check_close(model(x), reference(x), "Liger GeGLU MLP vs plain PyTorch MLP"):
            return 1

    compiled = torch.compile(model, mode=args.compile_mode) if args.compile else model

    # 2. One forward, without autograd, annotated so it is easy to find in the trace.
    def step(mlp=compiled):
        with torch.no_grad(), torch.profiler.record_function("kernels_mlp_fwd"):
            return mlp(x)

    # 3. Warm-up (on by default here; --no-warmup profiles cold): un-profiled calls of step(), then a sync.
    lesson.warm_up(step)
    # Guess, then look: one forward's work, counted on fake tensors through the plain MLP (the same three
    # GEMMs: Liger's Triton kernel cannot run on fake tensors)
    lesson = lesson.counted(functools.partial(step, reference), stand_in="through the plain PyTorch MLP")

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
