"""Guess first, then look (Part 3's closing habit): the lesson's guess against what its call ran."""

from __future__ import annotations

from collections import Counter

from common.report import names as trace_names
from common.report.guessed import AS_GUESSED, MISSING, NOT_GUESSED
from common.report.rules import Finding
from common.report.tables import Tables


def seen_name(item, depth: int = 1) -> str:
    """``aten::copy_ (under aten::clone)``: the op (a kernel with the op that launched it) and the
    ``depth`` innermost ops around it."""
    what = item.op or "(no op)"
    if item.kernel:
        what = f"{trace_names.short_name(item.kernel, 50)} (launched by {what})"
    via = item.via[-depth:] if depth else ()
    return f"{what} (under {' > '.join(via)})" if via else what


def guess_vs_seen(t: Tables):
    """P3.17: state what one call should run before looking, then line it up with what ran. On a GPU
    the kernels and copies a call launched, each named by its launching op; on the CPU the ops that
    did the arithmetic (the same ops). Every mismatch is the interesting part: an item nobody
    guessed (the masked_fill's copy), an item that never ran (no fused kernel in SDPA's math
    backend). The report prints the whole table (--short too), mismatches first."""
    check = t.guess
    if check is None:
        return None
    work, unit = check.work, ("device events" if check.work.on_device else "compute ops")
    missing, extra = check.count(MISSING), check.count(NOT_GUESSED)
    ran = len(work.typical)
    alike = "" if work.alike == work.calls else f"; {work.alike} of {work.calls} calls ran exactly this"
    guessed = len(check.guess.items)
    head = (f"{check.guess.annotation}: the post guesses {guessed} piece{'s' if guessed != 1 else ''} of work, a "
            f"call ran {ran} {unit}{alike}")
    evidence = dict(check.to_json(), missing=missing, not_guessed=extra, ran=ran)
    if not check.mismatches:
        return Finding("guess_vs_seen", f"{head}: all as guessed", "", evidence)
    parts = []
    if extra:
        seen = [r.seen for r in check.rows if r.status == NOT_GUESSED]
        if extra <= 3:
            names = [seen_name(item) for item in seen]
        else:  # many: by name, most first
            names = [f"{name} x{n}" if n > 1 else name
                     for name, n in Counter(seen_name(item, depth=0) for item in seen).most_common()]
        parts.append(f"{extra} not guessed: {_listed(names)}")
    if missing:
        parts.append(f"{missing} guessed and not run: {_listed([r.expected for r in check.rows if r.status == MISSING])}")
    matched = check.count(AS_GUESSED)
    return Finding("guess_vs_seen", f"{head}: {matched} as guessed, " + "; ".join(parts),
                   "each mismatch is the interesting part: open the trace at the call and read what ran around it "
                   "(the ops it sits under say why it runs)", evidence, level="warn")


def _listed(names: list, most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
