"""Guess first, then look (Part 3's closing habit): the lesson's guess against what its call ran."""

from __future__ import annotations

from collections import Counter

from common.report.model import names as trace_names
from common.report.facts.guess import AS_GUESSED, MISSING, NOT_GUESSED
from common.report.findings import Finding, in_window
from common.report.facts.tables import Tables
from common.amounts import fmt_bytes_decimal


def seen_name(item, depth: int = 1) -> str:
    """``aten::copy_ (under aten::clone)``: the op (a kernel with the op that launched it) and the
    ``depth`` innermost ops around it; a memset as a memset (``a 4 B memset (launched by aten::bmm)``)."""
    what = item.op or "(no op)"
    if item.is_memset:
        size = f"{fmt_bytes_decimal(item.bytes)} " if item.bytes is not None else ""
        what = f"a {size}memset (launched by {what})"
    elif item.kernel:
        what = f"{trace_names.short_name(item.kernel, 50)} (launched by {what})"
    via = item.via[-depth:] if depth else ()
    return f"{what} (under {' > '.join(via)})" if via else what


def guess_vs_seen(t: Tables):
    """P3.17, "guess first, then look": the lesson's guess of what one annotated call runs against what it ran (on a
    GPU the kernels and copies, each named by its launching op; on the CPU the ops that did the arithmetic),
    mismatches first.

    Every mismatch is the interesting part: an item nobody guessed (the masked_fill's copy), an item that never ran
    (no fused kernel in SDPA's math backend). A memset (cuBLAS's 4 bytes before a Hopper GEMM) is never taken for a
    guessed piece of work: it is named as a memset, a fill the library issues; a call whose only surprise is memsets
    ran all as guessed. The report prints the whole table (--short too)."""
    check = t.guess
    if check is None:
        return None
    work = check.work
    ran_one = len(work.typical) == 1
    unit = ("device event" if ran_one else "device events") if work.on_device else \
        ("compute op" if ran_one else "compute ops")
    missing, extra = check.count(MISSING), check.count(NOT_GUESSED)
    ran = len(work.typical)
    if work.on_device:
        unit += _by_kind(work.typical)
    alike = "" if work.alike == work.calls else f"; {work.alike} of {work.calls} calls ran exactly this"
    guessed = len(check.guess.items)
    head = (f"{check.guess.annotation}: the script guesses {guessed} piece{'s' if guessed != 1 else ''} of work, a "
            f"call ran {ran} {unit}{alike}")
    evidence = dict(check.to_json(), missing=missing, not_guessed=extra, ran=ran)
    fills = [r.seen for r in check.rows if r.status == NOT_GUESSED and r.seen.is_memset]
    if not check.mismatches or (not missing and extra == len(fills)):
        besides = f"; besides, {_listed([seen_name(item) for item in fills])}, which no guess names" if fills else ""
        return Finding("guess_vs_seen", f"{head}: {_all(check.count(AS_GUESSED))} as guessed{besides}", "", evidence,
                       spans=_not_guessed(t, check))
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
                   "(the ops it sits under say why it runs)", evidence, level="warn",
                   spans=_not_guessed(t, check))


def _not_guessed(t: Tables, check) -> tuple:
    """Where the work nobody guessed ran (its op, and on a GPU its device event), in every call alike."""
    return in_window(t, [span for r in check.rows if r.status == NOT_GUESSED for span in r.seen.spans])


def _all(n: int) -> str:
    return "all" if n == 1 else f"all {n}"


def _by_kind(items) -> str:
    """`` (5 kernels, 1 memcpy, 1 memset)``: a call's device events by kind ("" when all are kernels)."""
    kinds = Counter(item.device_kind for item in items)
    if set(kinds) <= {"kernel"}:
        return ""
    return " (" + ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind in ("kernel", "memcpy", "memset")
                            if (n := kinds.get(kind))) + ")"


def _listed(names: list, most: int = 4) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {len(names) - most} more" if len(names) > most else "")
