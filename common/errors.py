"""One clear line and exit status 2 for bad input, never a traceback."""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Callable, NoReturn


class BadInput(Exception):
    """Input or environment the program cannot work with; the message is the whole story."""


def fail(message: str) -> NoReturn:
    raise BadInput(message)


def exit_on_bad_input(main: Callable[..., int | None]) -> Callable[..., int]:
    """Wrap a command's main(): BadInput -> 'error: <message>' on stderr, exit status 2."""

    @functools.wraps(main)
    def wrapper(*args, **kwargs) -> int:
        try:
            return main(*args, **kwargs) or 0
        except BadInput as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return 130

    return wrapper


class CommandParser(argparse.ArgumentParser):
    """argparse whose usage errors are one line (``error: ... (see PROG --help)``) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)
