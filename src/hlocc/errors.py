"""hlocc's own exception types. Every error a user can cause is one of these, with the place and
the cause in its message; the CLI prints the message and exits non-zero (a traceback only with
--debug)."""

from __future__ import annotations

import os
from dataclasses import dataclass


class HloError(Exception):
    """Base class of every hlocc error."""


@dataclass(frozen=True)
class SourceLocation:
    """A place in HLO text: its file, 1-based line and column, and the line itself."""

    filename: str
    line: int
    column: int
    source_line: str

    def message(self, reason: str) -> str:
        """`file:line:col: error: reason`, the line and a caret under the column."""
        caret = " " * (self.column - 1) + "^"
        return f"{self.filename}:{self.line}:{self.column}: error: {reason}\n{self.source_line}\n{caret}"


class HloParseError(HloError):
    """Malformed HLO text. The message holds `file:line:col`, the offending line, a caret under the
    column and what was expected there."""

    def __init__(self, message: str, *, line: int, column: int, source_line: str, filename: str = "<hlo>"):
        self.line = line
        self.column = column
        self.reason = message
        self.filename = filename
        super().__init__(SourceLocation(filename, line, column, source_line).message(message))


class HloVerifyError(HloError):
    """An instruction breaks a shape or attribute rule; the message names the instruction, and with
    a `location` (where parsed text defines it) starts with its file:line:col and ends with the
    line and a caret, as a parse error's does."""

    def __init__(self, message: str, *, location: SourceLocation | None = None):
        self.reason = message
        self.location = location
        super().__init__(location.message(message) if location else message)


class UnsupportedError(HloError):
    """A valid HLO feature that this part of hlocc does not implement (yet)."""


class ResourceError(HloError):
    """A program needs more of a resource (memory) than the machine has; the message says how much."""


class ArgumentError(HloError):
    """Wrong number, shape or dtype of arguments passed to an Executable or to `hlocc run`."""


class SettingError(HloError):
    """An environment variable hlocc reads holds a value it cannot use; never a reason to fall back."""


class ElidedConstantsWarning(UserWarning):
    """The HLO text elided constants (`constant({...})`, XLA's default for large ones): they read as
    zeros, so the results are not the dumped program's (`elided_constants_message`)."""


def elided_constants_message(names: list[str], where: str) -> str:
    return (f"{len(names)} constant(s) elided as {{...}} in {where} (e.g. '{names[0]}') read as zeros, so the "
            "results are not the original program's; dump it with its constants (XLA_FLAGS="
            "--xla_dump_large_constants)")


def count_of(n: int, noun: str) -> str:
    """'1 parameter', '2 parameters': a count in a message."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def env_int(name: str, default: int, minimum: int) -> int:
    """The integer environment variable `name` (`default` when unset or blank), or a SettingError
    naming it and the value (a typo in a setting is the user's to fix, not an internal error)."""
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        raise SettingError(f"${name}='{text}': expected an integer") from None
    if value < minimum:
        raise SettingError(f"${name}={value}: expected an integer >= {minimum}")
    return value
