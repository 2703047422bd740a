"""Stage 1, load: a trace file -> :class:`~common.report.load.reader.Loaded`.

In: a path (plain or gzipped Chrome-trace JSON, as ``torch.profiler`` exports it). Out: the events as numpy
columns (:mod:`.columns`), the trace's metadata and the run's knobs. :mod:`.reader` puts it together:
:mod:`.file_bytes` reads the bytes (gzip, standard input, a mapped file), :mod:`.events` holds the structs msgspec
decodes events into, :mod:`.lenient` the slow path for odd traces and the error lines, :mod:`.slices`
decodes a big text a slice at a time (cut between events by :mod:`.spans`; in two processes on the command
line); :mod:`.inputs` says what is accepted, :mod:`.shapes` parses ``record_shapes``. Beside the trace, the copies of
the compiled modules a lesson wrote (``<trace>.graph0.py``) are read too (:func:`common.inductor_source.read_copies`:
each generated kernel's name, lines and ops). Nothing here interprets an event."""
