"""Last stage, render: facts and findings -> what people and programs read.

In: :class:`~common.report.facts.tables.Tables` and the rules' findings (or a comparison, or a job). Out:
the rich text report (:mod:`.text`), the JSON (:mod:`.json`), the HTML page (:mod:`.html`, with :mod:`.plots`), the
annotated trace (:mod:`.annotate`), the glance table (:mod:`.glance`), a job (:mod:`.job`). Renderers read
facts and findings only: they judge nothing and import no rule."""
