"""Exit statuses of the gantry CLI (one enum, so scripts and tests can rely on them)."""

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0
    ERROR = 1  # a known failure, explained on stderr
    USAGE = 2  # bad flags (argparse's own code)
    CHECK_FAILED = 3  # preflight found a blocker (quota, shape, API); nothing was created
    LEFTOVERS = 4  # destroy finished but something labelled with the deployment still bills
    INTERRUPTED = 130  # Ctrl-C
