"""The job report's straggler verdict controls for the machine (#26.6): a rank is named only when it
leads in every step, beyond the steps' noise, and its lag is its own (an annotation only it runs, or
more work); on a shared CPU the same ops running slower on one rank is the machine, "cannot tell".

Two-rank gloo jobs made by hand: per 1 ms step, ``aten::mm`` in forward (its length is the rank's
compute), then in backward one all-reduce ending 100 µs before the step ends on both ranks, lasting
longer on the rank that arrived first (it waited for the other).
"""

from __future__ import annotations

import json
from pathlib import Path

from conftest import event, run_module, write_trace


def rank_trace(path: Path, rank: int, *, mm_us: float, gloo_us: list[float], delay_us: float = 0.0,
               extra_ops: int = 0) -> Path:
    ev, t, wall = [], 0.0, 1000.0
    for i, gloo in enumerate(gloo_us):
        ev += [event(f"ProfilerStep#{i + 2}", t, wall, "user_annotation")]
        if delay_us:
            ev += [event("straggler_delay", t + 5, delay_us, "user_annotation")]
        start = t + 10 + delay_us
        ev += [event("aten::add", start + 5 + mm_us * k / (extra_ops + 1), 1) for k in range(extra_ops)]
        ev += [event("forward", start, mm_us + 10, "user_annotation"), event("aten::mm", start + 5, mm_us),
               event("backward", start + mm_us + 20, wall - 100 - (start + mm_us + 20 - t), "user_annotation")]
        end = t + wall - 100
        ev += [event("c10d::allreduce_", end - gloo - 5, 4), event("gloo:all_reduce", end - gloo, gloo, tid=7)]
        t += wall + 1
    return write_trace(path, ev, distributedInfo={"backend": "gloo", "rank": rank, "world_size": 2})


def job(tmp_path: Path, **ranks) -> tuple[dict, str]:
    paths = [rank_trace(tmp_path / f"job_rank{k}.json", k, **ranks[f"rank{k}"]) for k in (0, 1)]
    out = [run_module("common.report", *paths, *extra, timeout=120) for extra in (["--json"], [])]
    assert all(p.returncode == 0 for p in out), [p.stderr for p in out]
    return json.loads(out[0].stdout)["ranks"], " ".join(out[1].stdout.split())


def test_a_planted_delay_is_named_with_its_time(tmp_path):
    """Rank 1 sleeps 300 µs in straggler_delay every step; rank 0 waits 300 µs in the all-reduce."""
    ranks, text = job(tmp_path, rank0=dict(mm_us=150, gloo_us=[420] * 3),
                      rank1=dict(mm_us=150, gloo_us=[120] * 3, delay_us=300))
    s = ranks["straggler"]
    assert (s["rank"], s["behind_us"], s["own_annotation"], s["own_annotation_us"]) == (1, 300.0, "straggler_delay", 300.0)
    assert ("straggler: rank 1: the other ranks wait 300 µs per step for it (30% of a step, beyond the 0.0 µs the steps "
            "vary), in gloo:all_reduce issued in backward; rank 1's own straggler_delay takes 300 µs per step") in text


def test_the_wait_beyond_the_delay_is_said(tmp_path):
    """The others wait 700 µs for a rank whose delay is 300 µs: the verdict says the wait is 400 µs more."""
    ranks, text = job(tmp_path, rank0=dict(mm_us=50, gloo_us=[800] * 3),
                      rank1=dict(mm_us=50, gloo_us=[100] * 3, delay_us=300))
    assert ranks["straggler"]["behind_us"] == 700.0
    assert "rank 1's own straggler_delay takes 300 µs per step (the wait is 400 µs more than that)" in text


def test_the_same_ops_slower_on_a_shared_cpu_cannot_tell(tmp_path):
    """Rank 1 runs the same ops as rank 0, its aten::mm 450 µs against 150: the machine, not the job."""
    ranks, text = job(tmp_path, rank0=dict(mm_us=150, gloo_us=[420] * 3), rank1=dict(mm_us=450, gloo_us=[120] * 3))
    assert ranks["straggler"] is None
    assert ranks["straggler_cannot_tell"] == (
        "the others wait 300 µs per step for rank 1, but it ran the same ops as every rank (3 per step), only slower "
        "(compute 450 µs per step vs 150 µs): on a CPU shared with other work that is the machine (another process "
        "on its core), not the job")
    assert "straggler: cannot tell: the others wait 300 µs per step for rank 1" in text and "straggler: rank" not in text


def test_a_lead_that_is_not_in_every_step_cannot_tell(tmp_path):
    """Rank 0 waits 300 µs in #2 and #4 but not in #3: the median names rank 1, the steps do not."""
    ranks, _ = job(tmp_path, rank0=dict(mm_us=150, gloo_us=[420, 120, 420]),
                   rank1=dict(mm_us=150, gloo_us=[120, 120, 120], delay_us=0))
    assert ranks["straggler"] is None
    assert ranks["straggler_cannot_tell"] == (
        "the others wait 300 µs per step more than rank 1 (medians), but not in every step, by a tenth of a step "
        "(100 µs) each time: the least waiting rank and its lead per step: #2: rank 1 by 300 µs, #3: rank 0 by 0.0 µs, "
        "#4: rank 1 by 300 µs")


def test_an_idle_lag_in_no_annotation_cannot_tell(tmp_path):
    """Rank 1 runs the same ops as fast and is idle 300 µs longer, with nothing in its trace to say why."""
    ranks, _ = job(tmp_path, rank0=dict(mm_us=150, gloo_us=[420] * 3), rank1=dict(mm_us=150, gloo_us=[120] * 3))
    assert ranks["straggler"] is None
    assert ranks["straggler_cannot_tell"].startswith(
        "the others wait 300 µs per step for rank 1, which ran the same ops as every rank (3 per step) and was idle "
        "longer (neither computing nor communicating: ")


def test_more_work_on_one_rank_is_named(tmp_path):
    """Rank 1 runs 4 more ops per step than rank 0 (its forward longer by 300 µs): the lag is its own."""
    ranks, text = job(tmp_path, rank0=dict(mm_us=150, gloo_us=[420] * 3),
                      rank1=dict(mm_us=450, gloo_us=[120] * 3, extra_ops=4))
    assert (ranks["straggler"]["rank"], ranks["straggler"]["own_annotation"]) == (1, None)
    assert ranks["straggler_cannot_tell"] is None and "straggler: rank 1: the other ranks wait 300 µs" in text
