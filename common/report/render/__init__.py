"""Last stage, render: facts and findings -> what people and programs read.

In: :class:`~common.report.facts.tables.Tables` and the rules' findings (or a comparison, or a job). Out:
the rich text report (:mod:`.text`), the JSON (:mod:`.json`), the HTML page (:mod:`.html`, with :mod:`.plots`
and :mod:`.step_series`), the annotated trace (:mod:`.annotate`), a comparison (:mod:`.compare`), the glance
table (:mod:`.glance`), a job (:mod:`.job`); the parts the report shows in several forms: the memory
(:mod:`.memory`), the roofline (:mod:`.roofline`), the guess table (:mod:`.guess`), the timeline commands
(:mod:`.timeline_links`). Renderers read facts and findings only: they judge nothing and import no rule."""
