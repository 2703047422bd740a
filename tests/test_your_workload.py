"""Your own workload (issue 35): a lesson copied to a new name, its workload changed in a way its shape
flags cannot express, run as a learner runs it (from their own folder, no --trace_dir). The copy writes
under its own name, counts its own work before profiling (common/work.py), and its report's FLOPs per step
are that count, equal to one the test makes on its own: arithmetic written here, and torch's
FlopCounterMode for attention (a causal one at half its count, as docs/report.md states). The roofline
appears without --record-shapes, and no finding names a lesson or a post's part the copy does not run."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from common.commands import display_path
from conftest import REPO, command_env, run_module, run_script, run_torchrun

B, S, D, H = 2, 16, 64, 256  # the MLP's batch, seq, dim, hidden: small, a run takes seconds
HEADS, SEQ, HEAD_DIM = 4, 64, 32


def _mlp_flops() -> int:
    tokens = B * S
    return 3 * 2 * tokens * D * H + 2 * 2 * tokens * D * 4 * D  # the GeGLU MLP's 3 GEMMs, then dim -> 4 dim -> dim


def _sdpa_flops(causal: bool) -> int:
    """FlopCounterMode's count of one SDPA forward at the copy's shape, halved where causal."""
    import torch
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    q = torch.randn(2, HEADS, SEQ, HEAD_DIM)
    with FlopCounterMode(display=False) as counter:
        F.scaled_dot_product_attention(q, q, q, is_causal=causal)
    return counter.get_total_flops() // (2 if causal else 1)


PROMPT, NEW = 16, 4  # the LLM copy's prompt tokens and decode forwards
DDP_B, DDP_S, DDP_D, DDP_H, BLOCKS = 2, 16, 64, 256, 2  # the DDP copy's per-rank batch, seq, dim, hidden, blocks


def _llm_flops() -> int:
    """FlopCounterMode over the copy's request, made here on the lesson's default Llama (random weights,
    eager attention: plain matmuls, every score counted): the prefill with the cache and the last position's
    logits, NEW decode forwards, then the copy's score pass over the whole text."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import AutoModelForCausalLM, DynamicCache

    from common.llm import default_config

    model = AutoModelForCausalLM.from_config(default_config(), attn_implementation="eager").eval()
    text = torch.zeros(1, PROMPT, dtype=torch.long)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        cache = DynamicCache()
        model(input_ids=text, past_key_values=cache, use_cache=True, logits_to_keep=1)
        for _ in range(NEW):
            model(input_ids=text[:, :1], past_key_values=cache, use_cache=True)
        model(input_ids=torch.zeros(1, PROMPT + NEW + 1, dtype=torch.long))
    return counter.get_total_flops()


def _ddp_flops() -> int:
    """A training step of the DDP copy by arithmetic: each block's four GEMMs forward; backward, each weight's
    gradient and each input's, but for the first block's gate and up (the batch takes no gradient)."""
    tokens = DDP_B * DDP_S
    forward = BLOCKS * (3 * 2 * tokens * DDP_D * DDP_H + 2 * tokens * DDP_D * DDP_D)
    return 3 * forward - 2 * (2 * tokens * DDP_D * DDP_H)


# Each case: the lesson, its edit (old text -> new text, each must be found), the copy's flags, the FLOPs
# one step must count (by arithmetic or FlopCounterMode, never by the code under test).
CASES = {
    "my_matmul": ("01_matmul_add.py", [("return torch.add(torch.matmul(x, w), b)",
                                         "return torch.matmul(torch.relu(torch.add(torch.matmul(x, w), b)), w)")],
                  ["--size", "32", "--warmup"], lambda: 2 * 2 * 32**3),
    "my_linear": ("02_linear.py", [("model = nn.Linear(", "model = nn.Sequential(nn.Linear("),
                                   ("bias=True)", "bias=True), nn.GELU(), nn.Linear(fan_out, fan_out))")],
                  ["--batch", "8", "--in_dim", "16", "--out_dim", "32"], lambda: 2 * 8 * 16 * 32 + 2 * 8 * 32 * 32),
    "my_model": ("03_simple_mlp.py",
                 [("        self.down_proj = nn.Linear(hidden, dim, bias=False)\n",
                   "        self.down_proj = nn.Linear(hidden, dim, bias=False)\n        self.norm = nn.LayerNorm(dim)\n"
                   "        self.wide = nn.Linear(dim, 4 * dim, bias=False)\n        self.narrow = nn.Linear(4 * dim, dim, bias=False)\n"),
                  ("return self.down_proj(F.gelu(self.gate_proj(x), approximate=\"tanh\") * self.up_proj(x))",
                   "y = self.down_proj(F.gelu(self.gate_proj(x), approximate=\"tanh\") * self.up_proj(x))\n"
                   "        return self.narrow(F.relu(self.wide(self.norm(y))))")],
                 ["--batch", str(B), "--seq", str(S), "--dim", str(D), "--hidden", str(H), "--compile"], _mlp_flops),
    "my_attention": ("04_c_sdpa_attention.py", [("is_causal=True)", "is_causal=False)")],
                     ["--batch", "2", "--heads", str(HEADS), "--seq", str(SEQ), "--head_dim", str(HEAD_DIM),
                      "--backend", "flash"], lambda: _sdpa_flops(causal=False)),
    "my_naive": ("04_a_naive_attention.py", [("attn = torch.softmax(scores, dim=-1)",
                                              "attn = torch.softmax(scores, dim=-1)\n        attn = attn @ attn.transpose(-2, -1)")],
                 ["--batch", "2", "--heads", str(HEADS), "--seq", str(SEQ), "--head_dim", str(HEAD_DIM),
                  "--profile-memory"],
                 lambda: 2 * 2 * HEADS * (2 * SEQ * SEQ * HEAD_DIM + SEQ * SEQ * SEQ)),
    # another head split: the heads' outputs merged back through one more projection, [seq, heads·dim] @ [heads·dim, heads·dim]
    "my_inplace": ("04_b_inplace_ops_attention.py",
                   [("        out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]\n",
                     "        out = torch.matmul(attn, v)  # [batch, heads, seq, head_dim]\n"
                     "        merged = out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)\n"
                     "        out = merged @ torch.ones(merged.shape[-1], merged.shape[-1], dtype=out.dtype)\n")],
                   ["--batch", "2", "--heads", str(HEADS), "--seq", str(SEQ), "--head_dim", str(HEAD_DIM)],
                   lambda: 2 * 2 * HEADS * 2 * SEQ * SEQ * HEAD_DIM + 2 * 2 * SEQ * (HEADS * HEAD_DIM) ** 2),
    # a score pass after the request: the whole text once more, without the cache (e.g. to rank answers)
    "my_llm": ("05_llm.py", [("        return torch.cat(generated, dim=1)\n",
                              "            with torch.profiler.record_function(\"score\"):\n"
                              "                model(input_ids=torch.cat([prompt, *generated], dim=1))\n"
                              "        return torch.cat(generated, dim=1)\n")],
               ["--prompt-len", str(PROMPT), "--new-tokens", str(NEW), "--attn", "eager"], _llm_flops),
    # training: one more layer per block, after another activation
    "my_ddp": ("06_ddp.py", [("        self.down_proj = nn.Linear(hidden, dim, bias=False)\n",
                              "        self.down_proj = nn.Linear(hidden, dim, bias=False)\n"
                              "        self.extra = nn.Linear(dim, dim, bias=False)\n"),
                             ("return self.down_proj(F.gelu(self.gate_proj(x), approximate=\"tanh\") * self.up_proj(x))",
                              "return self.extra(torch.relu(self.down_proj(F.gelu(self.gate_proj(x), approximate=\"tanh\") "
                              "* self.up_proj(x))))")],
               ["--batch", str(DDP_B), "--seq", str(DDP_S), "--dim", str(DDP_D), "--hidden", str(DDP_H),
                "--blocks", str(BLOCKS)], _ddp_flops),
}
# a lesson's name, or a lesson's shape claimed for the copy ("the CPU analogue of Part 1's size 64")
LESSON_WORDS = re.compile(r"\b0[1-6]_[a-z_]+|Part \d's size|lesson's size")


def _copy(tmp: Path, name: str) -> Path:
    lesson, edits, _, _ = CASES[name]
    text = (REPO / lesson).read_text()
    for old, new in edits:
        assert old in text, f"{lesson} no longer holds {old!r}: update the copy's edit"
        text = text.replace(old, new)
    copy = tmp / f"{name}.py"
    copy.write_text(text)
    return copy


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """Every copy run from its own folder, two at a time, and its report's JSON."""
    base = tmp_path_factory.mktemp("yours")

    def go(name):
        folder = base / name
        folder.mkdir()
        copy = _copy(folder, name)
        if name == "my_ddp":  # two ranks, as torchrun starts them
            run = run_torchrun(str(copy), *CASES[name][2], "--no-report", cwd=folder)
        else:
            run = run_script(str(copy), *CASES[name][2], "--no-report", cwd=folder, env={"HF_HUB_OFFLINE": "1"})
        assert run.returncode == 0, run.stderr
        traces = sorted((folder / "traces").rglob("*.json"))
        report = run_module("common.report", "--json", *traces[:1], timeout=120)
        text = run_module("common.report", *traces[:1], timeout=120, env=command_env(COLUMNS="80"))
        return name, dict(run=run, folder=folder, traces=traces, doc=json.loads(report.stdout), text=text.stdout)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(go, CASES))


@pytest.mark.parametrize("name", list(CASES))
def test_a_copy_writes_under_its_own_name(copies, name):
    c = copies[name]
    assert {p.parent for p in c["traces"]} == {c["folder"] / "traces" / name}, c["traces"]
    assert not (REPO / "traces" / name).exists()
    doc = json.loads(c["traces"][0].read_text())
    lesson = doc["lesson"] if isinstance(doc["lesson"], dict) else json.loads(doc["lesson"])
    assert lesson["script"] == name
    assert f"uv run {name}.py" in subprocess.run([sys.executable, str(c["folder"] / f"{name}.py"), "--help"],
                                                   capture_output=True, text=True, cwd=c["folder"]).stdout


@pytest.mark.parametrize("name", list(CASES))
def test_a_copy_counts_its_own_work(copies, name):
    """The roofline's rows per step add up to the test's own count, without --record-shapes."""
    c = copies[name]
    r = c["doc"]["roofline"]
    assert r is not None and r["source"] == "count", r
    assert sum(row["flops"] for row in r["rows"]) == CASES[name][3](), r["rows"]
    assert "Roofline" in c["text"]


def test_attention_that_is_not_causal_is_not_called_causal(copies):
    """The copy made SDPA's attention non-causal: its row counts every score, and the words say so."""
    (f,) = [f for f in copies["my_attention"]["doc"]["findings"] if f["rule"] == "roofline"]
    assert "not causal" in f["message"] and "unmasked half" not in f["message"], f["message"]


@pytest.mark.parametrize("name", list(CASES))
def test_no_finding_names_a_lesson_the_copy_does_not_run(copies, name):
    said = [f"{f['rule']}: {f['message']} {f.get('hint') or ''}" for f in copies[name]["doc"]["findings"]]
    assert not [s for s in said if LESSON_WORDS.search(s)], said


DOC = REPO / "docs" / "your-workload.md"


def doc_commands() -> list[str]:
    """The commands of docs/your-workload.md's first bash block."""
    block = DOC.read_text().split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


def test_the_pages_commands_copy_and_run(tmp_path):
    """docs/your-workload.md as a learner follows it, in a folder of their own: the cp, then the run (with
    this interpreter for ``uv run``); the copy writes under its name and prints its count."""
    shutil.copy(REPO / "03_simple_mlp.py", tmp_path)
    cp, run = doc_commands()
    assert subprocess.run(cp, shell=True, cwd=tmp_path).returncode == 0
    argv = run.split()
    assert argv[:2] == ["uv", "run"]
    proc = run_script(str(tmp_path / argv[2]), *argv[3:], "--no-report", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p.parent.name for p in (tmp_path / "traces").rglob("*.json")] == ["my_model"]
    said = " ".join(proc.stdout.split())
    assert "work one call of step(): 5 aten ops, 403 MFLOP" in said and "fake tensors" in said, said


def test_a_copy_of_the_naive_attention_keeps_its_memory_finding(copies):
    """--profile-memory on the naive attention's copy: the score matrix's size comes from the count (its
    [batch, heads, seq, seq] as the scale reads it), in the annotation that holds the attention."""
    (f,) = [f for f in copies["my_naive"]["doc"]["findings"] if f["rule"] == "attention_scores_memory"]
    assert f["evidence"]["scores_shape"] == [2, HEADS, SEQ, SEQ] and f["evidence"]["annotation"] == "attn_fwd"
    assert f["evidence"]["score_sized_per_call"] >= 3


def test_a_compiled_copy_leads_to_its_own_code(copies):
    """The copy compiled (issue 40): Inductor's module is copied beside the copy's own trace, named after it, and the
    report leads from each kernel Inductor generated for the changed workload (the LayerNorm's among them) to its
    line there, with the command that runs it alone; nothing points into the lesson's folder."""
    from common import inductor_source

    c = copies["my_model"]
    (trace,) = c["traces"]
    (f,) = [f for f in c["doc"]["findings"] if f["rule"] == "generated_code"]
    (module,) = f["evidence"]["modules"]
    assert Path(module) == inductor_source.module_copy(trace, 0) and Path(module).parent == c["folder"] / "traces" / "my_model"
    kernels = f["evidence"]["kernels"]
    assert any("native_layer_norm" in k["name"] for k in kernels), [k["name"] for k in kernels]
    lines = Path(module).read_text().splitlines()
    for k in kernels:
        (code,) = k["code"]
        source = "\n".join(lines[code["line"] - 1:]).split("\n'''", 1)[0]  # the kernel's C++, to its closing quotes
        assert code["module"] == module and f'"{k["name"]}"' in source
    assert f["evidence"]["commands"] == [f"OMP_NUM_THREADS=1 uv run {display_path(module)} -p"]  # as printed
