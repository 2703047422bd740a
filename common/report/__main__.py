"""Command line of the trace report: ``uv run -m common.report --help`` (the command is :mod:`.cli.main`)."""

from __future__ import annotations

from common.errors import quit_on_interrupt

if __name__ == "__main__":
    quit_on_interrupt()  # a Ctrl-C while the modules import: one line, exit 130

from common.report.cli.main import main, run  # noqa: E402, F401 - run: the command in-process, for tests

if __name__ == "__main__":
    raise SystemExit(main())
