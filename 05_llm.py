"""Beyond the posts: Part 3's attention inside a language model, prefill then decode (transformers).

    uv run 05_llm.py                                          # a random 4-layer Llama: prefill vs decode
    uv run 05_llm.py --attn eager                             # 04_a's matmul + softmax instead of one SDPA op
    uv run 05_llm.py --cache static                           # a preallocated KV cache written in place
    uv run 05_llm.py --compile --cache dynamic                # the growing cache: recompile, then dynamic shapes
    uv run 05_llm.py --compile --cache static                 # one compiled decode graph for every token
    uv run 05_llm.py --compile --compile-mode reduce-overhead --cache static   # CUDA graphs (on a GPU)
    uv run 05_llm.py --model FOLDER_OR_HUB_ID --prompt "The capital of France is"

Part 3 profiled one attention call; here it runs inside every layer of a model. One profiler step
is one request: a `prefill` forward over the prompt fills the KV cache, then --new-tokens `decode`
forwards of one token each read it and add to it (greedy: the most likely token). With --compile
the decode forward is compiled, as transformers' generate() does; prefill runs eager. The default
model's weights are random (nothing to download).
Writes traces/05_llm/<batch>x<prompt_len>x<new_tokens>_<dtype>_<warm>_<mode>.txt and .json, plus the
variants model-<name> (--model), attn-<name> (not sdpa) and cache-static.
"""

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while torch imports: one line, "interrupted", exit 130

from common.lesson import lesson_main, parser, positive_int, setup  # noqa: E402

# transformers' attention implementations (sdpa: Part 3's 04_c; eager: its 04_a) and its KV caches
ATTENTIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")
CACHES = ("dynamic", "static")

cli = parser(__file__, __doc__, warmup_default=True)
cli.add_argument("--batch", type=positive_int, default=1, help="sequences per request (default: 1)")
cli.add_argument("--prompt-len", type=positive_int, default=128,
                 help="prompt tokens per sequence, random ids (default: 128; --prompt sets it from the text)")
cli.add_argument("--new-tokens", type=positive_int, default=32, help="decode forwards per request (default: 32)")
cli.add_argument("--attn", choices=ATTENTIONS, default="sdpa",
                 help="attention implementation: sdpa (one fused op, default) or eager (matmul + softmax)")
cli.add_argument("--cache", choices=CACHES, default="dynamic",
                 help="KV cache: dynamic (grows every token, default) or static (preallocated)")
cli.add_argument("--model", default=None, metavar="ID_OR_FOLDER",
                 help="a causal LM checkpoint: a local folder or a Hugging Face Hub id (default: a random Llama)")
cli.add_argument("--prompt", default=None, metavar="TEXT", help="with --model: tokenize TEXT as the prompt")

if __name__ == "__main__":
    args = cli.parse_args()  # --help, a bad flag or a bad value answer here, before torch's seconds-long import

import torch  # noqa: E402

from common import llm  # noqa: E402


@lesson_main
def main(args):
    # 1. The model: checked against the flags before anything is allocated (positions, attention, memory).
    plan = llm.plan(args)
    lesson = setup(args, shape=plan.shape, elements=plan.elements, variants=plan.variants)
    device, dtype = lesson.device, lesson.dtype
    llm.describe(lesson.console, plan)

    with lesson.busy("building the model"):
        model = llm.build(plan, device, dtype)
    prompt = llm.prompt_tokens(plan, device)  # [batch, prompt_len] token ids
    new_cache = llm.CacheMaker(plan)  # a fresh DynamicCache, or the StaticCache reset in place
    last_only = llm.last_logits_only(model)  # prefill: logits of the last position only, as generate() does
    decode = torch.compile(model, mode=args.compile_mode) if args.compile else model

    # 2. One step = one request: prefill the prompt, then decode one token at a time, passing the cache along.
    def step():
        cache = new_cache()
        with torch.no_grad():
            with torch.profiler.record_function("prefill"):
                out = model(input_ids=prompt, past_key_values=cache, use_cache=True, **last_only)
                token = out.logits[:, -1:].argmax(-1)  # greedy: the most likely next token
            generated = [token]
            for _ in range(args.new_tokens):
                with torch.profiler.record_function("decode"):
                    if args.compile:
                        torch.compiler.cudagraph_mark_step_begin()  # CUDA graphs: a new replay (no-op otherwise)
                    out = decode(input_ids=token, past_key_values=cache, use_cache=True)
                    token = out.logits[:, -1:].argmax(-1)
                generated.append(token)
        return torch.cat(generated, dim=1)

    # 3. Warm-up (on by default): whole requests, so compilation and first-call costs are paid here.
    lesson.warm_up(step, compiling="compiling the decode step")

    # Guess, then look: what one call of step() runs (each op's FLOPs and bytes), counted on fake tensors
    # before the profiler starts (no kernel runs); the report reads the workload from this count.
    lesson = lesson.counted(step)

    # 4. Profile: one prof.step() per request.
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
                generated = step()
                prof.step()

    # 5. Export the table and the trace; then the speeds of the profiled requests.
    table = prof.key_averages().table(sort_by=lesson.sort_by, row_limit=args.row_limit)
    with lesson.writing() as (table_path, trace_path):  # both files or neither (after a device sync)
        table_path.write_text(table + "\n")
        prof.export_chrome_trace(str(trace_path))

    llm.print_speeds(lesson.console, llm.read_speeds(prof, plan.request))
    llm.print_generated(lesson.console, plan, generated)
    if args.compile and not lesson.check_close(*llm.decode_pair(model, decode, prompt, new_cache),
                                               "compiled decode vs eager"):
        return 1
    return lesson.finish(table)


if __name__ == "__main__":
    raise SystemExit(main(args))
