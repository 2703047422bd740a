"""A trace written by the scripts loads in HolisticTraceAnalysis unchanged (skipped without HTA).

Install HTA beside the project to run it: `uv run --with holistictraceanalysis pytest tests/test_hta_interop.py`.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import CPU_DTYPE, run_script

hta = pytest.importorskip("hta.trace_analysis")


def test_script_trace_loads_in_hta(tmp_path):
    run = run_script("02_linear.py", "--no-report", trace_dir=tmp_path / "out")
    assert run.returncode == 0, run.stderr
    trace_dir = tmp_path / "hta"
    trace_dir.mkdir()
    shutil.copy(run.trace_dir / f"1024x32x64_{CPU_DTYPE}_warm_eager.json", trace_dir)  # HTA reads every trace in a folder
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir))
    df = analysis.t.get_trace(0)
    names = set(analysis.t.symbol_table.sym_table)
    assert {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4", "aten::addmm", "linear_fwd"} <= names
    assert len(df) > 20


def test_annotated_trace_loads_in_hta(tmp_path):
    """The report's annotated copy (a Findings track spliced in) still loads in HTA."""
    run = run_script("01_matmul_add.py", "--no-report", "--annotate", "--schedule", "0,0,4",
                     trace_dir=tmp_path / "out")
    assert run.returncode == 0, run.stderr
    trace_dir = tmp_path / "hta"
    trace_dir.mkdir()
    annotated = run.trace_dir / f"64_{CPU_DTYPE}_cold_eager_sched-0-0-4.annotated.json"
    shutil.copy(annotated, trace_dir)
    from common.report.render.annotate import FINDINGS_PID

    spliced = {e["name"] for e in json.loads(annotated.read_text())["traceEvents"]
               if e.get("pid") == FINDINGS_PID and e.get("ph") == "X"}  # which fired: the run's timing says
    assert spliced and "ProfilerStep#0" not in spliced, spliced
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir))
    names = set(analysis.t.symbol_table.sym_table)
    assert {"ProfilerStep#0", "matmul_add", "aten::mm"} | spliced <= names


@pytest.mark.parametrize("name", ["v100_ddp_rank1.json.gz", "a100_rank3.json.gz"])
def test_comm_comp_overlap_is_htas(tmp_path, name):
    """The report's communication/computation overlap is HTA's get_comm_comp_overlap, to its rounding."""
    from conftest import DATA_TRACES

    from common.report import tables_of as analyze

    shutil.copy(DATA_TRACES / "hta" / name, tmp_path)  # HTA reads every trace in the folder
    theirs = hta.TraceAnalysis(trace_dir=str(tmp_path)).get_comm_comp_overlap(visualize=False)
    ours = analyze(tmp_path / name).numbers.gpu.comm_comp_overlap_pct
    assert abs(ours - float(theirs["comp_comm_overlap_pctg"].iloc[0])) < 0.01
