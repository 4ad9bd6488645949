"""Error types: every user-facing failure is one of these and carries a one-line message."""


class PipesimError(Exception):
    """A user-facing error: the message names the bad input and the fix, on one line."""


class ScheduleError(PipesimError):
    """A schedule or Program is malformed, incomplete, mis-ordered or can deadlock."""


class DeadlockError(ScheduleError):
    """The Program can hang: the message names the cycle of waiting instructions."""
