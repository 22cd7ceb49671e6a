"""The trainer's user-facing error: its own module, below config.py and everything config validates against
(hardware, inference), so that none of them imports another in a circle."""


class ConfigError(ValueError):
    """A bad config value or key; the message names the field and the fix."""
