"""Ctrl-C and SIGTERM inside one long op (#26.8): Python runs a signal's handler only between bytecodes,
so a lesson inside one big matmul (over a minute at ``01_matmul_add.py --size 16384`` on the CPU) used to
answer when the op ended. ``common.signal_watch`` answers from another thread: one line, exit 143/130,
the files being written removed.

The process runs a lesson's ``main`` (:func:`common.lesson.lesson_main`) that registers a temporary file
as a lesson's writer does, says when it starts one 16384 x 16384 bf16 matmul on one thread (over a minute on
an idle core of this kind, longer under load) and is signalled a second later: an answer within a few
seconds is not the op's end, whatever the machine's load.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO

ANSWER_S = 5.0  # the watcher's second of grace, and room for a loaded machine; the matmul lasts far longer
ONE_LONG_MATMUL = """
import pathlib, sys
import torch
from common.errors import at_interrupt
from common.lesson import lesson_main

@lesson_main
def main():
    torch.set_num_threads(1)
    partial = pathlib.Path(sys.argv[1])
    partial.write_text("half a table")
    at_interrupt(partial.unlink)  # as common/output.py registers the files it writes
    x = torch.ones(16384, 16384, dtype=torch.bfloat16)
    print("matmul", flush=True)
    x @ x
    print("done", flush=True)

sys.exit(main())
"""


@pytest.mark.parametrize("signum, status, word", [(signal.SIGTERM, 143, "terminated"),
                                                  (signal.SIGINT, 130, "interrupted")])
def test_a_signal_inside_one_long_matmul_is_answered_at_once(tmp_path, signum, status, word):
    partial = tmp_path / "table.txt.partial"
    proc = subprocess.Popen([sys.executable, "-c", ONE_LONG_MATMUL, str(partial)], cwd=REPO, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert proc.stdout.readline() == "matmul\n", proc.stderr.read()
        time.sleep(1.0)
        assert proc.poll() is None and partial.exists()
        sent = time.monotonic()
        os.killpg(proc.pid, signum)
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, err, out) == (status, f"{word}\n", ""), (proc.returncode, err, out)
    assert took < ANSWER_S, f"answered after {took:.1f} s"
    assert not partial.exists()  # the file being written is removed
