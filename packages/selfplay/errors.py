"""The trainer's exit statuses and its user-facing errors: their own module, below config.py and everything config
validates against (hardware, inference), and free of torch, so that none of them imports another in a circle and
the command line catches them without importing what raises them."""

from enum import IntEnum


class ExitStatus(IntEnum):
    """What `python -m selfplay` exits with. The node agent counts any non-zero exit as a crash and `gantry run`'s
    check reads 0 as fine: keep the numbers. `launch` passes torchrun's own exit code through when a rank failed."""

    OK = 0  # done: a finished or stopped (SIGTERM, Ctrl-C: checkpointed) run, a check passed, a table printed
    ERROR = 1  # a checkpoint, evaluation, plot or runtime failure, explained in one line on stderr
    CONFIG = 2  # a bad config, flag or environment variable (ConfigError), or argparse's usage error
    INTERRUPTED = 130  # Ctrl-C outside the training loop (the loop itself checkpoints and exits OK)


# What a rank that lost another says (train.py): `launch` prints such lines after the others, so that on one machine
# the line of the rank that failed first, which says why, comes first.
LOST_CONTACT = "lost contact with another rank"


class SelfplayError(Exception):
    """A failure the trainer explains in one line that names the fix: the only kind the command line catches
    (selfplay/__main__.py), so a bug or an error torch raises keeps its traceback. ``status`` is the exit."""

    status = ExitStatus.ERROR


class ConfigError(SelfplayError, ValueError):
    """A bad config value or key; the message names the field and the fix."""

    status = ExitStatus.CONFIG


class CheckpointError(SelfplayError, RuntimeError):
    """A checkpoint that cannot be used; the message says which and what to do."""


class RunError(SelfplayError, RuntimeError):
    """A run that cannot go on (an actor that keeps dying, a device that cannot run): the message says why and
    what to do. A RuntimeError still, as torch's own failures are, for the code that tells the two apart."""
