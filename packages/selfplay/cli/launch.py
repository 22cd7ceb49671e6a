"""selfplay launch: one entry for one node or many: torchrun with a static rendezvous from plain environment
variables (NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, NPROC_PER_NODE); one process, one rank runs `train`."""

from __future__ import annotations

import errno
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from launch_contract import (
    DEFAULT_MASTER_PORT,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NNODES_ENV,
    NODE_RANK_ENV,
    NPROC_PER_NODE_ENV,
)

from selfplay.cli import train
from selfplay.cli.options import add_config_argument, load_config, settings_help
from selfplay.config_io import resolve_config
from selfplay.errors import LOST_CONTACT, ConfigError, ExitStatus

NAME = "launch"
HELP = ("train on NNODES x NPROC_PER_NODE ranks via torchrun (env: NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT, "
        "NPROC_PER_NODE)")
DESCRIPTION = HELP
EPILOG = settings_help()
TAKES_OVERRIDES = True  # --section.key=value settings; the help lists them, unwrapped


def add_arguments(parser) -> None:
    add_config_argument(parser)


def _env_int(name: str, default: int, minimum: int) -> int:
    raw = os.environ.get(name, "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be an integer >= {minimum}: fix the environment variable")
    return value


def run(args, overrides) -> int:
    load_config(args, overrides)  # fail here, once, on a bad config rather than in every rank
    nnodes = _env_int(NNODES_ENV, 1, 1)
    node_rank = _env_int(NODE_RANK_ENV, 0, 0)
    if node_rank >= nnodes:
        raise ConfigError(f"NODE_RANK={node_rank} must be below NNODES={nnodes}: number nodes 0..NNODES-1")
    import torch  # the GPU count: not for `--help` or the other verbs

    from selfplay.hardware import cuda_usable
    gpus = torch.cuda.device_count() if cuda_usable() else 0
    nproc = _env_int(NPROC_PER_NODE_ENV, max(1, gpus), 1)
    if nnodes == 1 and nproc == 1:
        return train.run(args, overrides)
    addr = os.environ.get(MASTER_ADDR_ENV, "127.0.0.1")
    port = _env_int(MASTER_PORT_ENV, DEFAULT_MASTER_PORT, 1)
    if node_rank == 0:
        _check_port_free(port)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--node-rank={node_rank}",
           f"--nproc-per-node={nproc}", f"--master-addr={addr}", f"--master-port={port}", "--max-restarts=0",
           "-m", "selfplay", "train", "--config", str(resolve_config(args.config)), *overrides,
           *(["--debug"] if args.debug else [])]
    print(f"launch: node {node_rank}/{nnodes}, {nproc} rank(s) here, master {addr}:{port}", flush=True)
    report = Path(tempfile.gettempdir()) / f"selfplay-torchrun-{os.getpid()}.log"
    # Each rank sets its own thread counts (actors 1, the learner the cores they leave); naming the variable
    # spares the user torchrun's banner about it.
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    child = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, errors="replace", env=env)
    relay = TorchrunRelay(child.stderr, report)
    relay.start()
    signalled = []

    def forward(signum, _frame):  # torchrun passes it on to every rank, which checkpoints and exits
        signalled.append(signum)
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    code = child.wait()
    relay.join(timeout=30)
    # torchrun exits non-zero when it was signalled even though the ranks stopped cleanly
    if signalled and code in (0, 1, -signal.SIGTERM, 128 + signal.SIGTERM):
        report.unlink(missing_ok=True)
        return ExitStatus.OK
    if code != 0 and not relay.rank_said_why:
        print(f"selfplay: error: a rank failed without saying why (torchrun exit {code}): torchrun's report is in "
              f"{report}", file=sys.stderr, flush=True)
    else:  # kept only where the error line names it: every other failure already said why in one line
        report.unlink(missing_ok=True)
    return code  # torchrun's own: the ranks' exit status, passed through


class TorchrunRelay(threading.Thread):
    """Passes the ranks' stderr through and files torchrun's own log lines, torch's C++ ones, its closing
    ChildFailedError report (a screen of traceback after the rank's one line that said what failed) and the resource
    trackers' warnings in ``report``.

    A rank that lost another says so (errors.LOST_CONTACT) as soon as the connection breaks, which can be before
    the rank that failed first has printed why: those lines are held back and passed on when the stream ends."""

    OWN_LINE = re.compile(r"^[EWI]\d{4} [\d:.]+ +\d+ \S*torch/")  # torchrun's logging: W1123 08:25:02.68 7807 …/torch/…
    # c10's logging from torch's C++, e.g. gloo's when a peer vanishes mid-connect:
    # [E1201 18:48:34.931417204 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed with [...] ...
    CPP_LINE = re.compile(r"^\[[EWI]\d{4} [\d:.]+ (\d+ )?[\w.]+:\d+\] ")
    # A killed rank cannot unlink its shared memory and semaphores; its multiprocessing resource tracker does,
    # and warns about each kind in two lines ("...resource_tracker.py:254: UserWarning: resource_tracker: There
    # appear to be 1 leaked semaphore objects ..." and the warnings.warn source line). Cleaned up, so not news.
    TRACKER_LINE = re.compile(r"resource_tracker")

    def __init__(self, stream, report: Path):
        super().__init__(daemon=True)
        self.stream, self.report = stream, report
        self.rank_said_why = False

    def run(self) -> None:
        in_report, log, lost_contact = False, None, []
        for line in self.stream:
            if (in_report or self.OWN_LINE.match(line) or self.CPP_LINE.match(line)
                    or self.TRACKER_LINE.search(line)):
                in_report = in_report or "failed (exitcode" in line
                log = log or open(self.report, "a", encoding="utf-8")  # noqa: SIM115 (closed below)
                log.write(line)
                continue
            self.rank_said_why = self.rank_said_why or "selfplay: error:" in line
            if LOST_CONTACT in line:
                lost_contact.append(line)
                continue
            sys.stderr.write(line)
            sys.stderr.flush()
        sys.stderr.writelines(lost_contact)
        sys.stderr.flush()
        if log is not None:
            log.close()


def _check_port_free(port: int) -> None:
    """Node 0 serves the rendezvous on MASTER_PORT: say so at once when something else holds it."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torchrun's store binds it
        try:
            probe.bind(("", port))
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise ConfigError(f"MASTER_PORT={port} is in use on this node (another run? `ss -ltnp | grep {port}`): "
                              f"stop it, or set MASTER_PORT to a free port on every node") from None
