"""`python3 -m gantry_agent`: what gantry-agent.service runs (infra/modules/startup_script)."""

from __future__ import annotations

import signal
import sys

from .agent import Agent
from .settings import Settings


class _Stopping(Exception):
    pass


def main() -> int:
    agent = Agent(Settings())

    def on_signal(signum, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one graceful stop, not two
        raise _Stopping()

    signal.signal(signal.SIGTERM, on_signal)
    try:
        agent.run_forever()
    except (_Stopping, KeyboardInterrupt):
        agent.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
