"""tests/gpu/run_all.py and its parts on the CPU: the plan, bad input, carried wheels, and the run's
second half (tests/gpu on a folder of runs, the filled claims doc, the fixtures) on synthetic runs."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parent / "gpu"
sys.path.insert(0, str(GPU))
import claims  # noqa: E402
import claims_doc  # noqa: E402
import gpu_synth as S  # noqa: E402
from conftest import REPO  # noqa: E402
import lesson_runs as LR  # noqa: E402
import run_all  # noqa: E402
import wheels as W  # noqa: E402
from lesson_runs import RUNS  # noqa: E402

DOC = REPO / "docs" / "gpu-claims.md"
HUB_RUN = "attn_hub"


@pytest.fixture(autouse=True)
def no_hub(tmp_path, monkeypatch):
    """No test asks the Hugging Face Hub, and its local cache is an empty folder of the test's own."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("KERNELS_CACHE", raising=False)


def plan_for(out: Path, *extra: str):
    return run_all.make_plan(run_all.parse_args([str(out), *extra]))


def make_wheel(folder: Path, dist: str, tags: str = "py3-none-any", module: str | None = None) -> Path:
    module = module or dist
    path = folder / f"{dist}-1.0-{tags}.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{module}/__init__.py", "WHERE = __file__\n")
        z.writestr(f"{dist}-1.0.dist-info/METADATA", f"Name: {dist}\nVersion: 1.0\n")
    return path


# ----------------------------------------------------------------------------- the plan and bad input


def test_dry_run_prints_every_post_command_and_writes_nothing(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(GPU / "run_all.py"), str(out), "--dry-run"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for run in RUNS:
        (line,) = [x for x in lines if x.split()[:1] == [run.key]]
        assert f"python {' '.join((run.script, *run.args))} --device cuda --gzip --trace_dir {out}/runs/{run.key}" in line
    assert any("--source pip" in x for x in lines if x.split()[:1] == ["liger"])
    for key, command in (("attn_naive", "04_a_naive_attention.py --device"),
                         ("attn_inplace", "04_b_inplace_ops_attention.py --device"),
                         *((f"sdpa_{b}", f"04_c_sdpa_attention.py --backend {b} --device")
                           for b in ("math", "efficient", "flash", "cudnn")),
                         ("attn_hub", "04_d_kernels_attention.py --device")):
        assert any(x.split()[:1] == [key] and f"python {command}" in x for x in lines), key
    (tests,) = [x for x in lines if x.startswith("tests ")]
    assert " -m pytest tests/gpu " in tests and f"GPU_RUNS_DIR={out}/runs" in tests
    assert "fixtures.tar.gz" in p.stdout and "gpu-claims.md" in p.stdout
    assert not out.exists()


def test_plan_unpacks_carried_wheels_and_skips_liger_without_one(tmp_path):
    if importlib.util.find_spec("liger_kernel") is not None:
        pytest.skip("liger-kernel is installed here")
    (liger,) = [c for c in plan_for(tmp_path / "out").lessons if c.key == "liger"]
    assert liger.skip == "liger_kernel is neither installed nor carried"
    whl = tmp_path / "whl"
    whl.mkdir()
    make_wheel(whl, "liger_kernel")
    plan = plan_for(tmp_path / "out", "--wheels", str(whl), "--runs", "liger,p1_64")
    assert [c.key for c in plan.lessons] == ["liger", "p1_64"] and not plan.lessons[0].skip
    assert [w.dist for w in plan.unpack] == ["liger_kernel"]
    assert "unpacked here: liger_kernel" in "\n".join(run_all.describe(plan))


@pytest.mark.parametrize("args, words", [
    (["--runs", "p1_64,nope"], "--runs: unknown run nope"),
    (["--wheels", "no-such-folder"], "--wheels no-such-folder: no such folder"),
])
def test_bad_input_one_line_exit_2(tmp_path, capsys, args, words):
    assert run_all.main([str(tmp_path / "out"), *args, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0]


def test_output_folder_must_be_new_or_empty(tmp_path, capsys):
    (tmp_path / "old.txt").write_text("x")
    assert run_all.main([str(tmp_path), "--dry-run"]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert run_all.main([str(tmp_path / "new"), "--dry-run"]) == 0


def test_usage_error_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        run_all.main([])
    assert exc.value.code == 2 and capsys.readouterr().err.startswith("error: ")


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")
def test_without_cuda_says_so_and_writes_nothing(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(GPU / "run_all.py"), str(out), "--runs", "p1_64"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 2 and p.stderr.strip().splitlines() == [
        "error: no CUDA device: run_all.py runs the lessons on a GPU (--dry-run prints the plan anywhere)"]
    assert not out.exists()


# ----------------------------------------------------------------------------- the Hub kernel's run


def hub_command(out: Path, monkeypatch, reachable: bool = False, kernels: bool = True) -> run_all.Command:
    monkeypatch.setattr(LR, "hub_reachable", lambda: reachable)
    real = run_all._importable
    monkeypatch.setattr(run_all, "_importable", lambda m: kernels if m == "kernels" else real(m))
    (command,) = plan_for(out, "--runs", HUB_RUN).lessons
    return command


def test_hub_run_skipped_offline_without_the_kernel_in_the_cache(tmp_path, monkeypatch):
    command = hub_command(tmp_path / "out", monkeypatch)
    assert command.skip == (f"HF_HUB_OFFLINE is set and kernels-community/flash-attn2 (version 3) is not in the "
                            f"local cache ({tmp_path / 'hf-cache'}): run it where the Hub is reachable, or fill the cache first")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    assert hub_command(tmp_path / "out", monkeypatch).skip.startswith(
        "the Hugging Face Hub is unreachable from here and kernels-community/flash-attn2 (version 3) is not in")
    assert hub_command(tmp_path / "out", monkeypatch, kernels=False).skip == "kernels is neither installed nor carried"


@pytest.mark.parametrize("kind", ["kernels", "models"])
def test_hub_run_reads_the_local_cache_offline(tmp_path, monkeypatch, kind):
    folder = tmp_path / "hf-cache" / f"{kind}--kernels-community--flash-attn2"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "v2").write_text("abc\n")
    assert hub_command(tmp_path / "out", monkeypatch).skip  # another version is not enough
    (folder / "refs" / "v3").write_text("def\n")
    command = hub_command(tmp_path / "out", monkeypatch)
    assert not command.skip and command.env == (("HF_HUB_OFFLINE", "1"),)
    assert command.note == f"kernels-community/flash-attn2: from the local cache {folder}, offline"
    (line,) = [x for x in run_all.describe(plan_for(tmp_path / "out", "--runs", HUB_RUN)) if x.split()[:1] == [HUB_RUN]]
    assert f"{HUB_RUN}          HF_HUB_OFFLINE=1 python 04_d_kernels_attention.py --device cuda" in line
    assert line.endswith(f"[kernels-community/flash-attn2: from the local cache {folder}, offline]")


def test_hub_run_from_the_hub_when_it_answers(tmp_path, monkeypatch):
    command = hub_command(tmp_path / "out", monkeypatch, reachable=True)
    assert (command.skip, command.env, command.note) == ("", (), "kernels-community/flash-attn2: from the Hugging Face Hub")


def test_hub_asked_once_and_only_for_a_hub_run(tmp_path, monkeypatch):
    asked = []
    monkeypatch.setattr(LR, "hub_reachable", lambda: asked.append(1) or False)
    plan_for(tmp_path / "out", "--runs", "p1_64,attn_naive")
    assert asked == []
    plan_for(tmp_path / "out", "--runs", f"{HUB_RUN},p1_64,{HUB_RUN}")
    assert len(asked) == (1 if importlib.util.find_spec("kernels") else 0)


def test_offline_hub_is_not_asked(monkeypatch):
    monkeypatch.setattr(LR.socket, "create_connection", lambda *a, **k: pytest.fail("the Hub was asked"))
    assert LR.hub_reachable() is False


def test_a_run_gets_its_own_environment(tmp_path):
    folder = tmp_path / "runs" / "k"
    code = "import os, sys; print(os.environ.get('HF_HUB_OFFLINE'), os.environ.get('OTHER'), sys.argv[-1])"
    command = run_all.Command("k", (sys.executable, "-c", code, str(folder)), env=(("HF_HUB_OFFLINE", "1"),))
    result = run_all.run_lesson(command, {"OTHER": "kept", "PATH": "/usr/bin:/bin"}, 60)
    assert result["returncode"] == 0 and (folder / "run.log").read_text().split() == ["1", "kept", str(folder)]


# ----------------------------------------------------------------------------- carried wheels


def test_wheels_unpack_only_what_is_missing_and_fits(tmp_path):
    whl = tmp_path / "whl"
    whl.mkdir()
    make_wheel(whl, "zz_fake_pkg")
    make_wheel(whl, "zz_fake_old", tags="cp27-cp27mu-manylinux1_x86_64")  # not for this Python
    make_wheel(whl, "pytest_stand_in", module="pytest")  # installed here: left alone
    carried = {w.dist: w for w in W.carried(whl)}
    assert carried["pytest_stand_in"].module == "pytest" and carried["pytest_stand_in"].installed
    assert not carried["zz_fake_old"].fits and carried["zz_fake_pkg"].fits
    done = W.unpack(list(carried.values()), tmp_path / "site")
    assert [w.dist for w in done] == ["zz_fake_pkg"]
    assert sorted(p.name for p in (tmp_path / "site").iterdir()) == ["zz_fake_pkg", "zz_fake_pkg-1.0.dist-info"]


def test_wheels_txt_lists_what_pytest_and_rich_need():
    listed = set(W.listed())
    assert {"msgspec", "numpy", "rich", "liger_kernel", "pytest"} <= listed
    for dist in ("pytest", "rich"):
        for req in metadata.requires(dist) or []:
            name, _, marker = req.partition(";")
            if "extra ==" in marker or "win32" in marker or "python_full_version < '3.11'" in marker \
                    or 'python_version < "3.11"' in marker:
                continue
            assert W.normalise(re.split(r"[<>=!~\[ (]", name.strip())[0]) in listed, req
    script = (GPU / "fetch_wheels.sh").read_text()
    assert "-r tests/gpu/wheels.txt" in script and "--only-binary=:all:" in script and "--no-deps" in script


# ----------------------------------------------------------------------------- the claims doc


def doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 6 and re.fullmatch(r"P\d\.\d+", cells[1]):
            rows[cells[1]] = cells[2:5]
    return rows


def test_claims_doc_names_a_real_test_or_rule_for_each_row():
    from common.report.rules.registry import RULES
    from lesson_runs import BY_KEY

    rows = doc_rows()
    tests = set(re.findall(r"^def (test_\w+)", (GPU / "test_gpu_claims.py").read_text(), re.M))
    rules = {fn.__name__ for fn in RULES}
    for claim in claims.CHECKS:
        assert claim in rows and claims_doc.TEST_RE.findall(rows[claim][1]), claim
    for claim, (what, check, seen_on) in rows.items():
        assert what and (seen_on != "") == (claim != "P3.17"), claim  # what the lessons' H100 runs showed
        assert set(claims_doc.TEST_RE.findall(check)) <= tests, claim
        for rule, key in claims_doc.RULE_RE.findall(check):
            assert rule in rules and key in BY_KEY, (claim, rule, key)


# ----------------------------------------------------------------------------- the run's second half


def test_tests_doc_and_fixtures_on_synthetic_runs(tmp_path):
    """tests/gpu on a folder of Hopper-style runs (P2.4's broken, liger's absent), then the doc and the pack."""
    plan = plan_for(tmp_path / "out", "--max-file-mb", "0.5")
    runs = S.hopper_runs(plan.out / "runs", mlp=S.mlp(S.H200, gelu_kernels=2))
    S.write_run(runs / "p1_64_active20", S.matmul_add(S.H200, steps=20), S.table(3.0, 0.1))
    (runs / "p1_64" / "run.log").write_bytes(b"x" * 600_000)  # over the fixture cap
    env = run_all.site_env(str(tmp_path / "site"))
    for key in ("p1_64", "linear", "p1_64_active20"):
        assert run_all.write_report(runs / key, env) == "ok"
    assert run_all.run_tests(plan, env) == 1  # P2.4 does not hold
    verdicts = claims_doc.read_verdicts(plan.out / "claims.jsonl")
    assert sorted(verdicts) == sorted(["P1.11", "P1.12", "P1.16", "P1.17", "P1.3", "P1.4", "P2.1", "P2.4", "P2.7"]
                                      + [f"P3.{i}" for i in range(1, 17)])
    assert [c for c, v in verdicts.items() if not v["holds"]] == ["P2.4"]
    run_all.fill_doc(plan, dict(gpu="NVIDIA H200", torch="2.15.0+cu128"))
    filled = {line.split("|")[1].strip(): line.split("|")[-2].strip()
              for line in (plan.out / "gpu-claims.md").read_text().splitlines() if re.match(r"\| P\d", line)}
    assert filled["P1.17"].startswith("NVIDIA H200, torch 2.15.0+cu128: holds: no bias copy")
    assert filled["P1.11"].startswith("NVIDIA H200, torch 2.15.0+cu128: holds: NVIDIA H200 (sm_90): no occupancy query")
    assert filled["P2.4"].startswith("NVIDIA H200, torch 2.15.0+cu128: DOES NOT HOLD: aten::gelu launched 2 kernels")
    assert filled["P2.9"].startswith("NVIDIA H200, torch 2.15.0+cu128: skipped: no liger run in GPU_RUNS_DIR")
    assert filled["P2.3"].startswith("NVIDIA H200, torch 2.15.0+cu128: gemm_kernels on linear: GEMM kernels")
    assert filled["P3.10"].startswith("NVIDIA H200, torch 2.15.0+cu128: holds: one pytorch_flash::flash_fwd_kernel per "
                                      "forward; here cuDNN is the fastest")
    assert filled["P3.13"].startswith("NVIDIA H200, torch 2.15.0+cu128: holds: one cudnn_generated_fort_native_sdpa_sm90")
    assert filled["P3.17"] == ""
    assert "kernel_gap did not fire on p1_64_active20" in filled["P1.8"]
    assert "no report for p1_64_wait0" in filled["P1.8"]
    assert filled["P2.8"] == "" and DOC.read_text() != (plan.out / "gpu-claims.md").read_text()
    assert run_all.pack(plan) == ["runs/p1_64/run.log"]
    with tarfile.open(plan.out / "fixtures.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"claims.jsonl", "pytest.xml", "gpu-claims.md", "runs/p1_64/report.json",
            "runs/p1_64/64_bf16_cold_eager.json.gz", "runs/mlp/64_bf16_cold_eager.txt"} <= names
    assert json.loads((plan.out / "runs" / "linear" / "report.json").read_text())["schema"] == "common.report/1"
