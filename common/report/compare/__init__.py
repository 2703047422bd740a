"""Two runs side by side: two traces' facts (and findings) -> a comparison.

In: each run's :class:`~common.report.facts.steps.RunSteps` (its model, step rows and header: ``--compare``
builds no other facts; a :class:`~common.report.facts.tables.Tables` is one too). Out: what changed, name by name
(:mod:`.rows`), the control that says whether the machine changed between the runs (:mod:`.control`),
and the verdict per step (:mod:`.judge`); each ``--glance`` variant against the one before it
(:mod:`.variants`). Rendered by :mod:`common.report.render.compare` and ``--html``."""
