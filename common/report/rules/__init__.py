"""Stage 4, rules: the trace-reading cheatsheet as code, one module per theme.

In: :class:`~common.report.facts.tables.Tables`. Out: the findings (:class:`~common.report.findings.Finding`),
in the order of :data:`.registry.RULES` (:func:`.registry.run_rules` runs them).

Each rule is a small function over the :class:`~common.report.facts.tables.Tables` (and the run's knobs,
``t.knobs``); its docstring's first paragraph says what it recognises (docs/report.md's table of the rules is
written from it: tests/rules_doc.py), the rest how, and which cheatsheet row of the posts it implements. It
returns a :class:`~common.report.findings.Finding` (the evidence, and the spans of time it points at) or None. Rules read numbers the tables computed and
judge them; they do not aggregate events (a number a rule needs is a field of its theme's record,
``facts/<theme>.py``, or a general table: docs/report.md, "Adding a rule").

The themes: :mod:`.trace` (the trace itself), :mod:`.overhead` (overhead- or compute-bound, the
profiler table's rows), :mod:`.timeline` (steps, gaps, syncs), :mod:`.gemm` (matrix multiplies and
the dispatch chain), :mod:`.copies` (copies you did not write), :mod:`.compile` (torch.compile,
CUDA graphs), :mod:`.generated_code` (from a compiled kernel to its code), :mod:`.phases` (per annotation),
:mod:`.guess` (the lesson's guess against what ran), :mod:`.attention` (Part 3), :mod:`.memory` (allocations,
--profile-memory), :mod:`.first_step` (the profiler's first recorded step), :mod:`.lag` (the GPU behind the
host), :mod:`.bandwidth` (memory-bound kernels' bytes per second), :mod:`.arch` (a kernel's design generation);
judgements several themes share are in :mod:`.judge`, the per-step figures in :mod:`.per_step`.
A new theme is a new module here and its rules' lines in :data:`.registry.RULES`, where the report's order
of findings is decided. This package's ``__init__`` imports nothing: ``from common.report.rules import advice``
loads advice, not every theme.
"""
