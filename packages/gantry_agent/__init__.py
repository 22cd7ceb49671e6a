"""The Gantry node agent: runs the trainer container that the launcher describes in instance metadata.

Stdlib only: it runs on the VM's system Python, shipped through metadata key `gantry-agent` (this package's files as
one JSON object, shipped_files) and started by systemd as `python3 -m gantry_agent` (gantry-agent.service, see
infra/modules/startup_script). No SSH, no public IP:

    launcher --setMetadata gantry-run--> metadata server <--wait_for_change-- agent --docker run--> trainer
    launcher <--getGuestAttributes-- gantry/agent <--PUT (a few a minute)-- agent
    launcher <--getSerialPortOutput (port 2)-- /dev/ttyS1 <-- trainer output, agent events
    launcher <--fsspec-- gs://BUCKET/runs/RUN_ID/logs/node-N.log <--upload (every few s)-- the same (TPU VMs)
    gs://BUCKET/runs/RUN_ID/sync/node-N/DIR <--restore, copies (every sync_seconds, at the end)--> host folder
        mounted at WORKDIR/DIR (a launch's --sync folders: a program's own checkpoints outlive the node)

On a Cloud TPU VM the launcher reaches the node through the Cloud TPU API, which has metadata and guest
attributes but no serial port: there the agent also keeps the run's output in the run's bucket folder
(ConsoleLog). Powering a TPU VM's host off does not stop the node's billing, and Cloud TPU has no run-duration
limit, so there the agent stops its own node through the Cloud TPU API (nodes:stop, the VM's token) where a VM
powers off, and also once the node has been up GANTRY_MAX_RUN_HOURS (max_run_hours, which GCE enforces on a VM):

    agent --POST v2/projects/P/locations/ZONE/nodes/NODE:stop--> tpu.googleapis.com    (P, ZONE, NODE: tpu-env)

The run spec (JSON in attribute gantry-run), the container's environment, the stats.jsonl it reads and the report
it writes are the launch contract (launch_contract.py), which ships beside this package as metadata key
gantry-contract: stdlib only, like this package, since both run on the VM's system Python.

The agent starts the container when a launch says start, restarts it after a crash or a reboot (the
trainer resumes from the bucket's newest checkpoint), stops it gracefully (`docker stop -t 25`: the
trainer checkpoints on SIGTERM; 15 s with --sync folders, then their final copy), stops it the same way at the
launch's time limit (RunSpec.deadline) and, with a stall limit, restarts one that prints and writes nothing new,
records the end of a launch (exit 0, the limit, a stop) in the bucket and leaves it alone, and powers the VM off (stops
the TPU node) after GANTRY_IDLE_SHUTDOWN_MINUTES without a run or GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES of
crash-looping; on a TPU VM up for GANTRY_MAX_RUN_HOURS it stops the trainer the same graceful way, then the node.
A stop that fails (no permission, no network) is logged in one line naming the fix and tried again later.

The modules, in the order the loop uses them:
    settings     everything from the environment (agent.env); GANTRY_METADATA_URL, GANTRY_AGENT_DOCKER (a command
                 line), GANTRY_AGENT_POWEROFF, GANTRY_AGENT_SERIAL, STORAGE_EMULATOR_HOST, GANTRY_AGENT_TPU_URL and
                 GANTRY_AGENT_UPTIME_FILE swap what it talks to for tests
    metadata     the metadata server: the run spec in, the report out (rate-limited), the VM's token
    decide       the decision, pure: what the node observes -> the next memory and the actions (fake-clock tests)
    agent        the loop: observe, decide, act through the adapters below, report
    containers   docker: pull, run (the contract's environment, a plain command, the --sync mounts), stop
    outputs      what the agent keeps of a launch's program: its output (serial port, last line), its own stats
                 file, its --sync folders' copies (on a timer, at the end, after a stop)
    ending       the end of a launch (exit 0, its time limit, a stop): recorded in the state folder and in the
                 bucket (RUN_DIR/ended/node-RANK.json), so neither a restarted agent nor a verb runs it again
    sync         one --sync folder and its copy in the bucket: restore, copy what changed
    storage      the bucket: file://, or gs:// through the Cloud Storage JSON API (list, get, simple upload)
    console_log  a TPU VM's output in the run's bucket folder (Cloud TPU has no serial port API)
    power        stopping the bill: power the host off, or nodes:stop a TPU VM's own node
"""

from pathlib import Path


def shipped_files() -> dict[str, str]:
    """What metadata key gantry-agent holds: this package's *.py files by name (infra/locals.tf's agent_bundle builds
    the same object with fileset; the node twin and the startup-script tests ship this one)."""
    return {path.name: path.read_text() for path in sorted(Path(__file__).parent.glob("*.py"))}
