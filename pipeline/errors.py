"""Errors a user can fix: the CLI prints their message as one line and exits 1.

Any exception with a true ``user_facing`` attribute is printed that way; a
library error that a user can cause subclasses ``UserError`` (or sets the
attribute) and names the file, key or next command in its message.
"""

from __future__ import annotations


class UserError(RuntimeError):
    """Input the user can fix (a missing step, a bad value); printed without a traceback."""

    user_facing = True


def is_user_facing(exc: BaseException) -> bool:
    return bool(getattr(exc, "user_facing", False))
