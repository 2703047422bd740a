"""The remedies the rules suggest, fitted to what the run already did: a compiled run is never told
to try torch.compile, a run that replays CUDA graphs never to try them (a warmed-up run is never
told to warm up: :func:`.judge.warmed_up`). What the run did comes from its knobs (a lesson's
trace says: ``--compile``, ``--compile-mode``) or, for CUDA graphs, from the trace itself
(cudaGraphLaunch calls). Where a rule's pattern still shows in such a run, the words say what
to look at instead.
"""

from __future__ import annotations

from common.report.facts.tables import Tables

GRAPH_MODES = ("reduce-overhead", "max-autotune")  # torch.compile modes that replay CUDA graphs


def compiled(t: Tables) -> bool:
    """The run compiled its workload: its knobs say so (--compile). torch.compile's frames in another
    trace show only that some of it was compiled, not what: the advice stands there."""
    return bool(t.knobs is not None and t.knobs.compile)


TRAINING_MARKS = ("Optimizer.step#", "Optimizer.zero_grad#", "autograd::engine::evaluate_function")


def trains(t: Tables) -> bool:
    """The run trains: an optimizer stepped (the profiler's ``Optimizer.step#SGD.step``) or autograd ran a
    backward pass. An inference run has no optimizer to fuse."""
    return any(n.startswith(TRAINING_MARKS) for n in t.model.names)


def graphs_replayed(t: Tables) -> bool:
    """The run replays CUDA graphs: a compile mode that captures them, or cudaGraphLaunch in the trace."""
    knobs = t.knobs
    return bool(knobs is not None and knobs.compile and knobs.compile_mode in GRAPH_MODES) or \
        t.graph_launches is not None


def fuse_ops(t: Tables, words: str = "fuse ops (torch.compile)") -> str:
    """``words`` for an eager run; for a compiled one, where to look instead."""
    if not compiled(t):
        return words
    return "see which ops the compiled graph still dispatches one by one (already compiled: the ops table)"


def cut_launches(t: Tables, words: str = "cut launches (CUDA graphs: torch.compile mode='reduce-overhead')") -> str:
    """``words`` for a run without CUDA graphs; for one that replays them, where to look instead."""
    if not graphs_replayed(t):
        return words
    return "see which launches are left outside the graphs (already on CUDA graphs: the cuda_graphs finding)"


def joined(parts: list[str]) -> str:
    """``a, b, or c``."""
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + ", or " + parts[-1]
