"""Occupancy from a kernel's footprint: how many blocks of it fit on one SM, and why.

A kernel event carries its launch (``registers per thread``, ``block`` threads, ``shared memory``
per block, ``grid``); the trace's ``deviceProperties`` carry each GPU's per-SM limits. From them,
as CUDA's occupancy calculator counts, come the resident blocks by each resource, the resident
warps and the theoretical occupancy; and Kineto's ``est. achieved occupancy %`` (the resident
blocks, or the launch's blocks per SM if fewer, in % of the SM's threads). Checked against the real
traces in ``tests/data`` (``tests/gpu/claims.py`` uses the same function). Plain Python: no numpy.

A kernel that is heavy per block (FlashAttention: 128 threads x 255 registers) has low occupancy
by design: only 2 such blocks fit on an A100 SM, 8 of its 64 warps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

REG_UNIT = 256  # registers are allocated per warp in units of 256 (sm_50 and newer)
SUB_PARTITIONS = 4  # an SM's register file is split in 4, each warp's registers in one part (sm_70+)
MAX_BLOCKS = {(7, 5): 16, (8, 6): 16, (8, 7): 16, (8, 9): 24, (12, 0): 24}  # resident blocks per SM; else 32


@dataclass(frozen=True)
class Footprint:
    """How many blocks of a kernel fit on one SM, by each resource, as CUDA's occupancy calculator and
    Kineto's ``est. achieved occupancy %`` count them (checked against real traces in tests/data)."""

    registers: int  # per thread
    threads: int  # per block
    shared: int  # bytes per block
    by_registers: int
    by_shared: int
    by_threads: int
    blocks: int  # resident blocks per SM: the least of the limits
    warps: int  # resident warps per SM
    max_warps: int
    threads_per_sm: int
    grid_per_sm: float  # the launch's blocks per SM
    shared_per_block_limit: int  # sharedMemPerBlock: above it a kernel must opt in

    @property
    def occupancy(self) -> float:
        """Theoretical occupancy, % of the SM's warps."""
        return 100.0 * self.warps / self.max_warps

    @property
    def estimate(self) -> float:
        """Kineto's estimate: resident blocks, or the launch's blocks per SM if fewer, in % of the SM's threads."""
        return 100.0 * min(self.blocks, self.grid_per_sm) * self.threads / self.threads_per_sm

    def limit(self) -> str:
        limits = {"registers": self.by_registers, "shared memory": self.by_shared, "threads": self.by_threads}
        return min(limits, key=limits.get)

    def describe(self) -> str:
        regs = self.registers * self.threads
        return (f"{self.registers} registers x {self.threads} threads = {regs:,} registers per block -> "
                f"{self.by_registers} block(s) by registers, {self.by_shared} by {self.shared:,} B shared memory, "
                f"{self.by_threads} by threads: {self.blocks} block(s) x {self.warps // max(self.blocks, 1)} warps = "
                f"{self.warps} of {self.max_warps} warps ({self.occupancy:.1f} %)")


def of_launch(registers: float, threads: float, shared: float, blocks: float, props: dict) -> "Footprint | str":
    """:func:`footprint` from a kernel event's numbers as the model keeps them (floats, NaN where the
    event lacks one): registers per thread, threads per block, shared memory per block, grid blocks."""
    def whole(x: float) -> Optional[int]:
        return int(x) if x == x and float(x).is_integer() else None  # NaN != NaN

    block = whole(threads)
    grid = whole(blocks)
    return footprint(whole(registers), [block, 1, 1] if block else None, whole(shared),
                     [grid, 1, 1] if grid else None, props)


KINETO_SHARED_LIMIT_NOTE = (
    "Kineto's estimate runs CUDA's occupancy calculator with the default limit of shared memory per block "
    "(sharedMemPerBlock, 48 KB) and not the kernel's opt-in to more, so a kernel whose block uses more "
    "fits no block there and reads 0 %")


def kineto_reads_zero(f: "Footprint") -> bool:
    """Whether Kineto's ``est. achieved occupancy %`` of this launch is 0 by its own calculator's limit:
    the block asks for more shared memory (with CUDA's 1 KB reserve on sm_80+) than sharedMemPerBlock."""
    return f.shared > f.shared_per_block_limit


def occupancy_caption(kernels) -> str:
    """What the footprint column is, and, where Kineto's occupancy reads 0 for a kernel whose footprint
    fits blocks, why (``kernels``: rows with ``est_achieved_occupancy_pct``, ``footprint_occupancy_pct``,
    ``kineto_shared_limit``)."""
    text = ("occupancy: Kineto's estimate; footprint: theoretical occupancy, the blocks that fit on one SM "
            "by registers, shared memory and threads (as Nsight Compute's)")
    zero = [k for k in kernels if k.kineto_shared_limit and not k.est_achieved_occupancy_pct
            and k.footprint_occupancy_pct]
    if zero:
        text += (f". {len(zero)} kernel(s) here read 0 % from Kineto with a footprint of "
                 f"{', '.join(f'{k.footprint_occupancy_pct:g} %' for k in zero[:4])}: their blocks use over "
                 "48 KB of shared memory, and " + KINETO_SHARED_LIMIT_NOTE.split(", so ")[0].replace(
                     "Kineto's estimate runs", "Kineto runs") + ": 0 is its calculator's limit, not the kernel's")
    return text


def _prop(props: dict, *names: str) -> Optional[int]:
    for n in names:
        value = props.get(n)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def footprint(registers, block, shared, grid, props: dict) -> "Footprint | str":
    """The footprint of one launch on the device of ``props``, or why it cannot be computed (a string)."""
    if not isinstance(registers, int) or not isinstance(shared, int) or not isinstance(block, list) \
            or len(block) != 3 or not all(isinstance(b, int) for b in block):
        return "the kernel event carries no registers per thread / shared memory / block"
    regs_per_sm = _prop(props, "regsPerMultiprocessor")
    threads_per_sm = _prop(props, "maxThreadsPerMultiprocessor", "maxThreadsPerMultiProcessor")
    shared_per_sm = _prop(props, "sharedMemPerMultiprocessor")
    missing = [n for n, v in (("regsPerMultiprocessor", regs_per_sm), ("maxThreadsPerMultiprocessor", threads_per_sm),
                              ("sharedMemPerMultiprocessor", shared_per_sm)) if v is None]
    if missing:
        return f"the trace's deviceProperties carry no {missing[0]}"
    warp = _prop(props, "warpSize") or 32
    if threads_per_sm < warp:  # no device has an SM that holds less than one warp: the numbers are not a device's
        return f"the trace's deviceProperties say {threads_per_sm} threads per SM, fewer than a warp ({warp})"
    major, minor = props.get("computeMajor") or 0, props.get("computeMinor") or 0
    threads = block[0] * block[1] * block[2]
    if threads <= 0:
        return "a block of no threads"
    warps_per_block = -(-threads // warp)
    regs_per_warp = -(-registers * warp // REG_UNIT) * REG_UNIT
    by_regs = (regs_per_sm // SUB_PARTITIONS // regs_per_warp * SUB_PARTITIONS) // warps_per_block if registers else 10**6
    reserved = 1024 if major >= 8 else 0  # CUDA keeps 1 KB of shared memory per block from sm_80 on
    by_shared = shared_per_sm // (shared + reserved) if shared + reserved else 10**6
    by_threads = threads_per_sm // threads
    blocks = min(by_regs, by_shared, by_threads, MAX_BLOCKS.get((major, minor), 32))
    grid_blocks = grid[0] * grid[1] * grid[2] if isinstance(grid, list) and len(grid) == 3 else 0
    sms = _prop(props, "numSms") or 1
    return Footprint(registers, threads, shared, by_regs, by_shared, by_threads, blocks, blocks * warps_per_block,
                     threads_per_sm // warp, threads_per_sm, grid_blocks / sms if grid_blocks else float(blocks),
                     _prop(props, "sharedMemPerBlock") or 49152)
