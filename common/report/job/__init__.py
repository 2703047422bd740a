"""One job, every rank: several traces -> :class:`~common.report.job.result.JobReport`.

In: the traces of one distributed job (:mod:`.files` says which belong together). Out: per rank its step
times and time in collectives, the overlap, and the straggler (:mod:`.straggler`) where the evidence carries
it; :mod:`.ranks` runs each rank through load -> model -> facts and reads them together."""
