"""Stage 3, facts: :class:`~common.report.model.build.Model` -> :class:`~common.report.facts.tables.Tables`.

In: the model. Out: every number the report gives, computed once, in typed rows (:mod:`.rows`): general
tables (kernels, ops, phases, steps, headline numbers), then one module per theme (memory, roofline,
regime, first step, gaps, ...). Measuring only: nothing here judges; the rules do."""
