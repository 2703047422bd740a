"""Stage 1, load: a trace file -> :class:`~common.report.load.reader.Loaded`.

In: a path (plain or gzipped Chrome-trace JSON, as ``torch.profiler`` exports it). Out: the events as numpy
columns (:mod:`.columns`), the trace's metadata and the run's knobs. :mod:`.reader` reads and decodes (big
files cut between events by :mod:`.spans`), :mod:`.inputs` says what is accepted, :mod:`.shapes` parses
``record_shapes``. Nothing here interprets an event."""
