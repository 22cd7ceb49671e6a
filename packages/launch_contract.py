"""The launch contract: what the laptop, the node agent, the container and the program in it agree on.

One stdlib-only file that imports nothing of Gantry's, because it runs in four places:

    laptop (gantry)  --run spec (metadata RUN_KEY)-->  VM agent  --env (*_ENV)-->  container: selfplay, toytrain, yours
    laptop (gantry)  <--report (guest attribute NAMESPACE/REPORT_KEY)--  VM agent  <--its --stats file--  program
    bucket (RUN_DIR)  <--the --sync folders (sync_url), the end (ended_url)--  VM agent  <--a local folder--  program

The launcher (packages/gantry) and the trainers (packages/selfplay, packages/toytrain) import it as the module
``launch_contract`` (pyproject's py-modules); the node agent imports it the same way on the VM, where Terraform
ships this file as instance metadata key ``gantry-contract`` and the startup script writes it beside the agent's package
(infra/modules/startup_script). So a name two layers share is defined here once; ``selfplay`` and ``gantry``
never import each other (tests/unit/test_layering.py).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re

# ---- where the launcher and the agent meet: instance metadata and guest attributes -----------------------------
# Terraform's startup_script module renders the same two names into agent.env (run_metadata_key,
# guest_attribute_namespace); Terraform's ignore_changes blocks (infra/main.tf, infra/tpu.tf) must spell RUN_KEY out,
# since ignore_changes takes no expressions.
RUN_KEY = "gantry-run"  # instance metadata key of the run spec (RunSpec.to_json)
NAMESPACE = "gantry"  # guest-attribute namespace; boot state is NAMESPACE/boot (the startup script)
REPORT_KEY = "agent"  # the agent's one guest attribute, NAMESPACE/REPORT_KEY: a Report as JSON
RUN_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")  # a folder under gs://BUCKET/runs/ and runs/, a container's name
RUN_ID_RULE = "lowercase letters, digits, . _ -, starting with a letter or digit, at most 63"


def check_run_id(run_id: str) -> str:
    """The one run-id rule (the launcher's check and the spec's); ValueError names it."""
    if not RUN_ID.fullmatch(str(run_id)):
        raise ValueError(f"{run_id!r} is not a run id ({RUN_ID_RULE})")
    return str(run_id)


# ---- what the container gets: the rendezvous, the run's folder --------------------------------------------------
DEFAULT_MASTER_PORT = 29500  # torchrun's rendezvous port on node 0
# What every container gets in its environment (the agent's docker_run_args), whichever program it runs:
# torchrun's rendezvous as `selfplay launch` reads it and the run's directory (a bucket URL, which the agent writes:
# a program writes local folders, and the agent copies its --sync folders there).
NNODES_ENV, NODE_RANK_ENV, MASTER_ADDR_ENV, MASTER_PORT_ENV = "NNODES", "NODE_RANK", "MASTER_ADDR", "MASTER_PORT"
NPROC_PER_NODE_ENV = "NPROC_PER_NODE"  # only when the launch names it (--nproc-per-node)
LOCAL_RANK_ENV = "LOCAL_RANK"  # set by torchrun in each rank's process: which GPU of the node is its own
RUN_DIR_ENV = "GANTRY_RUN_DIR"  # gs://BUCKET/runs/RUN_ID: where the agent keeps the run's output
PJRT_DEVICE_ENV = "PJRT_DEVICE"  # torch_xla's runtime: TPU on a TPU VM (the trainer's run.device=auto then means XLA)
# Epoch seconds at which the agent stops the program (SIGTERM, STOP_GRACE_SECONDS, its --sync folders' last copy): the
# launch's time limit (RunSpec.deadline). Absent: no limit. A program that wants to end on its own (a final
# evaluation, an end record) plans to finish before it; the selfplay trainer does.
DEADLINE_ENV = "GANTRY_DEADLINE"

# ---- your own project: a plain command, the folders that outlive a node, the program's own stats -----------------
# The names a program of any shape reads, whatever launches it (SkyPilot's SKYPILOT_NODE_RANK and friends, in
# Gantry's spelling), beside torchrun's NNODES, NODE_RANK, MASTER_ADDR and MASTER_PORT, which every container gets.
GANTRY_NODE_RANK_ENV = "GANTRY_NODE_RANK"  # this node's rank, 0 on the master
GANTRY_NUM_NODES_ENV = "GANTRY_NUM_NODES"
GANTRY_NODE_IPS_ENV = "GANTRY_NODE_IPS"  # every node's internal IP in rank order, comma-separated (node 0 first)
GANTRY_GPUS_PER_NODE_ENV = "GANTRY_GPUS_PER_NODE"  # the GPUs this node's container sees (0 on a CPU node)
PROJECT_ROOT = "/workspace"  # where `gantry build --project` puts a project in its image (its WORKDIR)
# RUN_DIR/sync/node-<RANK>/<DIR>/...: the bucket's copy of each folder a launch names with --sync, one per node, since
# every node runs the same command and writes its own (a restarted node gets back what it wrote)
SYNC_FOLDER = "sync"
DEFAULT_SYNC_SECONDS = 120  # how often the agent copies those folders to the bucket while the program runs
# `gantry stop`: the agent sends the program SIGTERM (docker stop) and waits this long before SIGKILL; a Spot
# preemption gives about 30 s. Then it copies the --sync folders to the bucket a last time.
STOP_GRACE_SECONDS = 25
# GCE gives a preempted Spot VM 30 s between ACPI G2 Soft Off and G3 Mechanical Off (cloud.google.com/compute/docs/
# instances/spot, "Preemption process"); systemd stops the agent first (its unit is After=docker.service). A run with
# --sync folders spends them on the program's grace, the final copy (cut off after SYNC_FINAL_SECONDS at a shutdown:
# the copies every sync_seconds before hold what it leaves) and SHUTDOWN_MARGIN_SECONDS for docker and the agent.
SPOT_NOTICE_SECONDS = 30
SYNC_FINAL_SECONDS = 10
SHUTDOWN_MARGIN_SECONDS = 5


# ---- a Ray cluster across the nodes (gantry run --ray) ---------------------------------------------------------
# Node 0's container starts a Ray head on RAY_PORT (Ray's own default) and then the program, which finds the cluster
# in RAY_ADDRESS (ray.init() with no address reads it); every other node's container joins the head and runs nothing
# else (the agent's ray_cluster.py).
RAY_PORT = 6379
RAY_ADDRESS_ENV = "RAY_ADDRESS"


MAX_NPROC_PER_NODE = 64  # ranks torchrun starts on one node: an A3 has 8 GPUs, a C4 up to 288 vCPUs
MASTER_PORTS = range(1024, 65536)  # the program's user (not root) may listen on these, on the host network
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What every container gets from the agent (docker_run_args), whichever program it runs: the rendezvous and the run's
# folder (GANTRY_NODE_IPS on a launch that knows the nodes' addresses, as every gantry run does)
EVERY_CONTAINER_ENV = (NNODES_ENV, NODE_RANK_ENV, MASTER_ADDR_ENV, MASTER_PORT_ENV, GANTRY_NODE_RANK_ENV,
                       GANTRY_NUM_NODES_ENV, GANTRY_NODE_IPS_ENV, GANTRY_GPUS_PER_NODE_ENV, RUN_DIR_ENV)
# ... and the names no --env may set: those, the ones a launch or torchrun adds, and the deadline
CONTRACT_ENV = {*EVERY_CONTAINER_ENV, NPROC_PER_NODE_ENV, LOCAL_RANK_ENV, PJRT_DEVICE_ENV, DEADLINE_ENV}


def check_env_pair(pair: str) -> tuple[str, str]:
    """A --env KEY=VALUE: (KEY, VALUE); ValueError names what is wrong."""
    key, equals, value = pair.partition("=")
    if not equals or not ENV_NAME.fullmatch(key):
        raise ValueError(f"{pair!r} is not KEY=VALUE (KEY: letters, digits and _, not starting with a digit)")
    if key in CONTRACT_ENV:
        raise ValueError(f"{key} is set by the agent on every node ({pair!r} would contradict it)")
    return key, value


def sync_stop_grace(grace: float = STOP_GRACE_SECONDS, final: float = SYNC_FINAL_SECONDS) -> int:
    """The program's grace when its node has --sync folders to copy last: what the Spot notice leaves (15 s)."""
    return max(1, min(int(grace), int(SPOT_NOTICE_SECONDS - final - SHUTDOWN_MARGIN_SECONDS)))


# Where a program's own stats (--stats FILE, a JSON object or JSON lines) say how far it is: the first of these keys
# that holds a number is the report's step, so `gantry status` and the crash-loop rule see progress.
STEP_KEYS = ("step", "iteration", "iter", "epoch", "global_step")
LAST_LINE_CHARS = 200  # the end of the newest line a program printed, as a report carries it


def sync_url(run_dir: str, node_rank: int, folder: str) -> str:
    """The bucket's copy of node ``node_rank``'s --sync folder (a path relative to the program's working directory)."""
    return f"{run_dir.rstrip('/')}/{SYNC_FOLDER}/node-{node_rank}/{folder.strip('/')}"


# ---- the run's bucket, as every writer and reader of it names things -----------------------------------------------
# Its API's address: Google's, unless STORAGE_EMULATOR_HOST names another (the name google-cloud-storage and gcsfs
# read): one setting for the laptop, the agent and the containers (tests: a GCS server).
STORAGE_API = "https://storage.googleapis.com"
STORAGE_EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def storage_endpoint(environ) -> str:
    endpoint = (environ.get(STORAGE_EMULATOR_ENV) or STORAGE_API).rstrip("/")
    return endpoint if "://" in endpoint else f"http://{endpoint}"


def partial_name(name: str) -> str:
    """The one partial-file rule: a file is written as .NAME.part beside its place, then renamed, so no reader (a
    listing, a restore, `gantry fetch`) takes half of one."""
    head, _, tail = name.rpartition("/")
    return (f"{head}/" if head else "") + f".{tail}.part"


def is_partial(name: str) -> bool:
    tail = name.rpartition("/")[2]
    return tail.startswith(".") and tail.endswith(".part")


def check_relative(path: str, what: str) -> str:
    """A --sync folder or --stats file: relative to the project's root and inside it; ValueError names the rule."""
    parts = path.replace("\\", "/").strip("/").split("/")
    if not path or path.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{what} {path!r} must be a path inside the project, relative to its root (no '..')")
    return "/".join(parts)


# ---- what the agent writes into the run's bucket besides the --sync folders ----------------------------------
# A run's output on a TPU VM, under its run directory (gantry logs reads it: the Cloud TPU API has no serial port).
CONSOLE_LOG = "logs/node-{rank}.log"


def console_log_url(run_dir: str, rank: int) -> str:
    return f"{run_dir.rstrip('/')}/{CONSOLE_LOG.format(rank=rank)}"


# ---- the end of a launch, whatever program it ran: its node's agent records it in the bucket ---------------------
ENDED = "ended/node-{rank}.json"  # under the run directory: node RANK's EndRecord (ended_url)
ENDED_REASONS = ("exited", "time-limit", "stopped")  # exit 0 on its own; RunSpec.max_minutes; `gantry stop`


def ended_url(run_dir: str, rank: int) -> str:
    return f"{run_dir.rstrip('/')}/{ENDED.format(rank=rank)}"


@dataclasses.dataclass(frozen=True)
class EndRecord:
    """Node ``node_rank``'s launch ``launch`` (RunSpec.launch_id) is over: no verb starts that node for it again.
    Written as JSON (dataclasses.asdict) by the agent; ``from_json`` gives None for anything else."""

    launch: str
    node_rank: int
    reason: str  # one of ENDED_REASONS
    at: float  # epoch seconds
    detail: str = ""

    @classmethod
    def from_json(cls, raw) -> EndRecord | None:
        try:
            return cls(**{k: v for k, v in json.loads(raw).items() if k in cls.__dataclass_fields__})
        except (ValueError, TypeError, AttributeError):
            return None


# ---- the run spec: what the launcher asks of each node ---------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class RunSpec:
    """What one node runs: the same run and trainer flags on every node, each node its rank.

    ``launched_at`` is a launch's identity: the same run resumed is a new launch the agent acts on."""

    run_id: str
    image: str  # a digest-pinned reference: every node runs the same bits
    node_rank: int
    nnodes: int
    master_addr: str
    args: tuple = ()  # the program: with torchrun `-m MODULE ARGS` or `SCRIPT ARGS`; with command the command;
    # else words for the image's ENTRYPOINT
    master_port: int = DEFAULT_MASTER_PORT
    nproc_per_node: int = 0  # 0: the trainer decides (one rank per GPU, else one)
    gpu: bool = False
    tpu: bool = False  # a Cloud TPU VM: the container gets the TPU chips (TPU_RUN_ARGS) and PJRT_DEVICE=TPU
    action: str = "start"  # start | stop
    launched_at: str = ""
    run_dir: str = ""  # the run's directory (RUN_DIR_ENV): gs://BUCKET/runs/RUN_ID
    # True: the container runs `torchrun RENDEZVOUS ARGS` (the agent's torchrun_args), not the image's entry point:
    # your own trainer, from your image or a package under packages/ in the trainer image.
    torchrun: bool = False
    # True: args is a plain command (`python scripts/train.py --gpus all`), run as given in the image's working
    # directory (PROJECT_ROOT in an image `gantry build --project` made), without the image's ENTRYPOINT.
    command: bool = False
    node_addrs: tuple = ()  # every node's internal IP in rank order (GANTRY_NODE_IPS_ENV)
    sync: tuple = ()  # folders relative to the working directory the agent keeps in the bucket (sync_url)
    sync_seconds: int = DEFAULT_SYNC_SECONDS
    stats_file: str = ""  # relative to the working directory: the program's own stats (stats_figures)
    max_minutes: float = 0.0  # the agent stops the program this long after launched_at (deadline); 0: no limit
    stall_minutes: float = 0.0  # a running program with no new output line or stats for this long: a crash; 0: never
    env: tuple = ()  # KEY=VALUE pairs the program gets besides the contract's names
    shm_size: str = ""  # the container's /dev/shm (docker's --shm-size); "": the agent's setting
    cpus: float = 0.0  # the node's CPUs the container may use (docker's --cpus); 0: all of them
    gpu_ids: tuple = ()  # the node's GPUs the container gets, by index (docker's --gpus device=...); (): all
    # ((key, format), ...) of the stats numbers the agent reports and `gantry status` shows, in this order ("loss
    # {:.3f}"; pairs, since the spec's JSON sorts an object's keys); (): the record's first numbers, as named. A
    # project's gantry.yaml names them (its `figures`).
    figures: tuple = ()
    show: dict = dataclasses.field(default_factory=dict)  # what else `gantry status` shows (gantry.yaml's pace, reports)
    # True: one Ray cluster across the nodes (RAY_PORT above): node 0 runs the command, the others join its head
    ray: bool = False

    def __post_init__(self):
        check_run_id(self.run_id)
        if self.action not in ("start", "stop"):
            raise ValueError(f"action {self.action!r} (start or stop)")
        if not 0 <= int(self.node_rank) < int(self.nnodes):
            raise ValueError(f"node_rank {self.node_rank} of nnodes {self.nnodes}")
        if self.torchrun and not self.args:
            raise ValueError("torchrun with no program (args: -m MODULE ARGS or SCRIPT ARGS)")
        if self.command and not self.args:
            raise ValueError("command with nothing to run (args: the command and its arguments)")
        if self.command and self.torchrun:
            raise ValueError("command and torchrun: a launch runs one of them")
        if self.ray and not self.command:
            raise ValueError("ray without a command: node 0 runs a plain command in the Ray cluster")
        if self.ray and any(str(pair).partition("=")[0] == RAY_ADDRESS_ENV for pair in self.env):
            raise ValueError(f"{RAY_ADDRESS_ENV} is the Ray head's address on node 0 in a Ray launch")
        if int(self.sync_seconds) <= 0:
            raise ValueError(f"sync_seconds {self.sync_seconds} (> 0)")
        if int(self.master_port) not in MASTER_PORTS or not 0 <= int(self.nproc_per_node) <= MAX_NPROC_PER_NODE:
            raise ValueError(f"master_port {self.master_port} ({MASTER_PORTS.start}-{MASTER_PORTS.stop - 1}), "
                             f"nproc_per_node {self.nproc_per_node} (0-{MAX_NPROC_PER_NODE})")
        if float(self.max_minutes) < 0 or float(self.stall_minutes) < 0:
            raise ValueError(f"max_minutes {self.max_minutes}, stall_minutes {self.stall_minutes} (>= 0; 0: none)")
        for pair in self.env:
            check_env_pair(str(pair))
        if float(self.cpus) < 0 or (self.gpu_ids and not self.gpu) or any(int(i) < 0 for i in self.gpu_ids):
            raise ValueError(f"cpus {self.cpus} (>= 0), gpu_ids {self.gpu_ids} (indices of a GPU node's GPUs)")
        object.__setattr__(self, "gpu_ids", tuple(int(i) for i in self.gpu_ids))
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        object.__setattr__(self, "node_addrs", tuple(str(a) for a in self.node_addrs))
        object.__setattr__(self, "env", tuple(str(a) for a in self.env))
        object.__setattr__(self, "sync", tuple(check_relative(str(f), "sync folder") for f in self.sync))
        if self.stats_file:
            object.__setattr__(self, "stats_file", check_relative(str(self.stats_file), "stats file"))
        pairs = tuple(self.figures.items() if isinstance(self.figures, dict) else self.figures)
        if not all(len(p) == 2 and all(isinstance(v, str) for v in p) for p in pairs) or not isinstance(self.show, dict):
            raise ValueError(f"figures {self.figures!r} ((key, format) pairs), show {self.show!r} (an object)")
        object.__setattr__(self, "figures", tuple(tuple(p) for p in pairs))

    @property
    def launch_id(self) -> str:
        return f"{self.run_id}@{self.launched_at}"

    @property
    def deadline(self) -> float | None:
        """Epoch seconds at which the agent stops this launch (launched_at + max_minutes); None: no limit."""
        try:
            return float(self.launched_at) + 60 * float(self.max_minutes) if self.max_minutes else None
        except ValueError:
            return None

    @property
    def container(self) -> str:
        """The container's name: one per run and node, so nodes sharing an engine never collide."""
        return f"gantry-run-{self.run_id}-{self.node_rank}"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, raw: str) -> RunSpec:
        """The spec from the metadata value; ValueError names what is wrong."""
        try:
            data = json.loads(raw)
            fields = {f.name for f in dataclasses.fields(cls)}
            return cls(**{k: v for k, v in data.items() if k in fields and v is not None})
        except (TypeError, AttributeError) as exc:
            raise ValueError(str(exc)) from None


# ---- the report: what the agent tells the launcher --------------------------------------------------------------
class State(str, enum.Enum):
    """The agent's state, as its report carries it (a str, so the JSON and `gantry status` show the value)."""

    IDLE = "idle"
    PULLING = "pulling"
    RUNNING = "running"
    RESTARTING = "restarting"
    STOPPING = "stopping"
    FINISHED = "finished"
    STOPPED = "stopped"
    ERROR = "error"
    POWERING_OFF = "powering-off"

    def __str__(self) -> str:
        return self.value

    @property
    def active(self) -> bool:
        """A run holds the node: it does not idle towards a power-off, and `gantry run` will not start another."""
        return self in ACTIVE_STATES


ACTIVE_STATES = frozenset({State.PULLING, State.RUNNING, State.RESTARTING, State.STOPPING})
DONE_STATES = frozenset({State.FINISHED, State.STOPPED})


@dataclasses.dataclass(frozen=True)
class Report:
    """The agent's guest attribute NAMESPACE/REPORT_KEY: its state, the run it holds, the run's progress."""

    state: State | None = None  # None: no report yet (the node is booting, or its agent never wrote)
    run: str = ""
    node_rank: int | None = None
    step: int | None = None  # the newest step in the program's --stats file (stats_figures)
    figures: dict = dataclasses.field(default_factory=dict)  # of that record: RunSpec.figures' keys, else its first
    detail: str = ""  # why: the error, the exit code, what is being pulled
    heartbeat: int | None = None  # epoch seconds of the write: a stale report means a dead agent or node
    last_line: str = ""  # the end (LAST_LINE_CHARS) of the newest line the program printed
    last_line_at: int | None = None  # epoch seconds when the agent saw that line
    stats_problem: str = ""  # why the program's --stats file gives no numbers ("is a folder, not a file", ...)
    # node 0 of a Ray launch: the cluster as `ray status` counts it ({"nodes": 2, "CPU": 16.0, "GPU": 0.0})
    ray: dict = dataclasses.field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({**dataclasses.asdict(self), "state": self.state.value if self.state else None})

    @classmethod
    def from_json(cls, raw: str) -> Report:
        """The report from the attribute's value; an empty or unreadable value is no report (Report())."""
        try:
            data = json.loads(raw) if raw else {}
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        try:
            state = State(data.get("state")) if data.get("state") else None
        except ValueError:
            state = None  # a newer agent's state this launcher does not know: shown as no report
        figures = data.get("figures")
        return cls(state=state, run=str(data.get("run") or ""), node_rank=data.get("node_rank"),
                   step=data.get("step"), figures=figures if isinstance(figures, dict) else {},
                   detail=str(data.get("detail") or ""), heartbeat=data.get("heartbeat"),
                   last_line=str(data.get("last_line") or ""), last_line_at=data.get("last_line_at"),
                   stats_problem=str(data.get("stats_problem") or ""),
                   ray=data["ray"] if isinstance(data.get("ray"), dict) else {})
