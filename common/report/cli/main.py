"""The command: parse the arguments (:mod:`.args`), check the outputs (:mod:`.checks`), run the mode
(:mod:`.modes`). ``common/report/__main__.py`` calls :func:`main`; tests call :func:`run` in-process."""

from __future__ import annotations

import os
import sys

from common.errors import exit_on_bad_input
from common.report.cli import modes
from common.report.cli.args import ignored_flags, parse_args
from common.report.cli.checks import check_job_outputs, check_outputs


@exit_on_bad_input
def run(argv=None, from_shell: bool = False) -> int:
    """The command on ``argv``: its exit status (bad input: one ``error:`` line, exit 2)."""
    args = parse_args(argv)
    if from_shell:
        from common.report.load.reader import keep_decoded_until_exit  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

        keep_decoded_until_exit()  # the process leaves with os._exit: nothing decoded is freed one by one
    for line in ignored_flags(args):
        print(f"note: {line}", file=sys.stderr)
    check_outputs(args)
    if args.compare:
        return modes.compare(args)
    if args.glance:
        return modes.glance(args)
    from common.report.job.files import job_inputs  # lazy: the stages load numpy and msgspec (300 ms): --help answers without them

    job = job_inputs(args.traces)
    if job is not None:  # a folder, or several ranks' traces: one report over the job
        check_job_outputs(args, job)
        return modes.job(args, job)
    return modes.single(args)


def main(argv=None) -> int:
    """Run the command. From the shell (no ``argv``), the process leaves with ``os._exit`` once its
    output is flushed: the decoded traces are not freed object by object."""
    from_shell = argv is None
    code = run(argv, from_shell)  # one line for bad input, a write error or an interrupt (common.errors)
    if from_shell:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # flushed inside run already; nothing more to say
                pass
        os._exit(code)
    return code
