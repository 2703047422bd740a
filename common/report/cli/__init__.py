"""The ways in: the command line and the lessons' console. They call the package (:mod:`common.report.pipeline`,
the stages, the renderers); nothing in the package calls them.

In: the command line's arguments, or a lesson's trace. Out: what is printed and written. The command is
:mod:`.main` (``uv run -m common.report``): :mod:`.args` parses, :mod:`.checks` checks the output paths, and
:mod:`.modes` runs one mode (one or several traces, a job, ``--glance``, ``--compare``). :mod:`.lesson` is what
a lesson prints about the trace it wrote (the short report, the page, the annotated copy, a job's report)."""
