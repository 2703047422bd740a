"""The report as JSON, for programs: one trace's tables and findings -> the ``--json`` object.

The JSON schema (``common.report/1``) is documented in one place, docs/report.md ("JSON schema"):
a key added or changed here is written there.
"""

from __future__ import annotations

from dataclasses import asdict

from common.report.render.memory import memory_json
from common.report.facts.tables import Tables
from common.report.findings import Finding
from common.report.units import json_ready
from common.report.facts.roofline import roofline_json


def to_json(t: Tables, findings: list[Finding]) -> dict:
    """The JSON-ready dict of one trace's report (what ``--json`` writes for it)."""
    return json_ready(dict(
        schema="common.report/1",
        trace=dict(path=t.model.path, bytes=t.model.size_bytes, file_bytes=t.model.file_bytes, events=t.model.n_events),
        meta=dict(gpus=[asdict(g) for g in t.header.gpus], versions=t.header.versions,
                  distributed=t.header.distributed),
        window=asdict(t.numbers.window),
        gpu=asdict(t.numbers.gpu),
        cpu=asdict(t.numbers.cpu),
        device=asdict(t.numbers.device),
        efficiency=asdict(t.numbers.efficiency),
        tensorboard=asdict(t.numbers.tensorboard),
        steps=[asdict(r) for r in t.step_rows],
        breakdown=asdict(t.breakdown),
        categories=[asdict(c) for c in t.categories],
        kernels=[k.to_json() for k in t.kernels],
        ops=[asdict(o) for o in t.ops],
        phases=[p.to_json() for p in t.phases],
        guess=t.guess.to_json() if t.guess is not None else None,
        launched_outside=t.launched_outside.to_json() if t.launched_outside is not None else None,
        memory=memory_json(t),
        roofline=_roofline_json(t),
        findings=[f.to_json() for f in findings],
        notes=list(t.model.notes),
    ))


def _roofline_json(t: Tables) -> dict:
    return roofline_json(t.roofline) if t.roofline is not None else None

