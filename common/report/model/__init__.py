"""Stage 2, model: :class:`~common.report.load.reader.Loaded` -> :class:`~common.report.model.build.Model`.

In: the loaded columns. Out: the run as a model, each fact once: the profiler steps and the window, the CPU
lane with its call tree, the device lanes, kernel <-> launch correlation, the GPUs (:mod:`.gpus`,
:mod:`.peaks`), and names read (:mod:`.names`, :mod:`.short_names`). Numbers that cannot be true are left
out here (:mod:`.impossible`), so no later stage sees them (a rate the facts compute from them that no device
reaches is flagged there: :mod:`~common.report.facts.impossible`)."""
