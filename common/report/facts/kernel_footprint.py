"""One kernel name's footprint for the kernels table (:class:`~.rows.KernelRow`): its theoretical occupancy
(:mod:`.occupancy`, from the registers, threads and shared memory of its first call with all three), the
resource that limits it, and whether Kineto's estimate reads 0 there by its 48 KB default limit."""

from __future__ import annotations

import numpy as np

from common.report.facts import occupancy
from common.report.model.build import Model


def kernel_footprint(m: Model, rows: np.ndarray) -> dict:
    """The footprint's theoretical occupancy of one kernel name (its first call with every launch
    figure), the resource that limits it, and whether Kineto's estimate reads 0 by its 48 KB limit."""
    dev = m.dev
    known = np.isfinite(dev.regs[rows]) & np.isfinite(dev.threads[rows]) & np.isfinite(dev.smem[rows])
    if not known.any():
        return {}
    i = int(rows[np.flatnonzero(known)[0]])
    fp = occupancy.of_launch(dev.regs[i], dev.threads[i], dev.smem[i], dev.blocks[i],
                             m.devices.get(int(dev.device[i]), {}))
    if isinstance(fp, str):
        return {}
    return dict(footprint_occupancy_pct=fp.occupancy, footprint_limit=fp.limit(),
                kineto_shared_limit=occupancy.kineto_reads_zero(fp))
