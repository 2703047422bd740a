"""Stage 3, facts: :class:`~common.report.model.build.Model` -> :class:`~common.report.facts.tables.Tables`.

In: the model. Out: every number the report gives, computed once, in typed rows (:mod:`.rows`): general
tables that many rules and the renderers read (kernels, ops, phases, steps, headline numbers, memory,
roofline, regime, ...), then one record per rules theme, made in the module of the theme's name
(:mod:`.gemm`, :mod:`.timeline`, :mod:`.copies`, ...) for ``rules/<theme>.py`` alone. Measuring only:
nothing here judges; the rules do."""
