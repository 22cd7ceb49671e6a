"""The agent's settings: everything from the environment (/etc/gantry/agent.env on a VM, rendered by
infra/modules/startup_script), read once, and the names Terraform and the launcher share with it."""

from __future__ import annotations

import os
import shlex

from launch_contract import (
    NAMESPACE,
    RUN_KEY,
    STOP_GRACE_SECONDS,
    SYNC_FINAL_SECONDS,
    storage_endpoint,
    sync_stop_grace,
)

# A trainer that keeps exiting non-zero without a new training step for this long powers its node off. The usual
# cause is a preempted Spot peer: the other nodes fail at the rendezvous and restart until someone restarts the
# peer, billing all the while. 30 min is well past what a peer needs to come back on its own or by `make run-gcp`
# (boot, about 2 min; pulling a multi-GB CUDA image, up to about 10) and still cuts an unattended preemption's bill
# from max_run_hours to half an hour. A stopped node keeps its disk; `make status` / `make run-gcp` start it again.
CRASH_LOOP_ENV = "GANTRY_CRASH_LOOP_SHUTDOWN_MINUTES"
CRASH_LOOP_SHUTDOWN_MINUTES = 30.0  # 0 = never
# Cloud TPU puts this instance attribute on its VMs (torch_xla reads the TPU's topology from it): how the agent
# knows it runs on a TPU VM before any TPU run spec arrives.
TPU_ENV_ATTRIBUTE = "tpu-env"
# Its lines are `KEY: 'value'`; these name the node the agent stops (nodes:stop). Google does not document tpu-env;
# the key names are what Google's own MaxText reads on TPU VMs (github.com/AI-Hypercomputer/maxtext,
# multihost_job.py, get_env_command_str: `grep '^NODE_ID' /tmp/tpu-env | cut -d "'" -f 2`, likewise ZONE and
# CONSUMER_PROJECT_ID). The project and zone fall back to the metadata server's standard project/project-id and
# instance/zone; the node's name has no other source (a TPU VM's instance name is t1v-n-...-w-0, not the node's).
TPU_PROJECT_KEY, TPU_ZONE_KEY, TPU_NODE_KEY = "CONSUMER_PROJECT_ID", "ZONE", "NODE_ID"
# max_run_hours (infra/variables.tf) reaches the agent in /etc/gantry/agent.env under this name, rendered by
# infra/modules/startup_script as idle_shutdown_minutes is. GCE enforces it on a VM (max_run_duration); on a TPU VM
# (google_tpu_v2_vm has no run-duration setting) the agent does: the node's uptime, so each start has the full budget.
MAX_RUN_HOURS_ENV = "GANTRY_MAX_RUN_HOURS"
# What the node's service account needs to stop its own TPU node (infra/iam.tf grants these when use_tpu).
TPU_STOP_PERMISSION = "tpu.nodes.stop"


class Settings:
    """Everything from the environment (/etc/gantry/agent.env on a VM), read once."""

    def __init__(self, environ=os.environ):
        def get(name, default):
            return environ.get(name) or default
        self.metadata_url = get("GANTRY_METADATA_URL", "http://metadata.google.internal/computeMetadata/v1")
        self.run_key = get("GANTRY_RUN_METADATA_KEY", RUN_KEY)
        self.namespace = get("GANTRY_GUEST_ATTRIBUTES_NAMESPACE", NAMESPACE)
        self.registry_host = get("GANTRY_REGISTRY_HOST", "")
        self.idle_minutes = float(get("GANTRY_IDLE_SHUTDOWN_MINUTES", "0"))  # 0 = never power off
        self.crash_loop_minutes = float(get(CRASH_LOOP_ENV, str(CRASH_LOOP_SHUTDOWN_MINUTES)))  # 0 = never
        self.max_run_hours = float(get(MAX_RUN_HOURS_ENV, "0"))  # enforced on a TPU VM only; 0 = no limit
        # Seconds since boot (the node's uptime for max_run_hours); tests: a file they write.
        self.uptime_file = get("GANTRY_AGENT_UPTIME_FILE", "/proc/uptime")
        # The Cloud TPU API, where a TPU VM's agent stops its own node; tests: a fake.
        self.tpu_url = get("GANTRY_AGENT_TPU_URL", "https://tpu.googleapis.com").rstrip("/")
        # How soon a power-off or TPU node stop that failed is tried again (a missing role, no network).
        self.stop_retry_seconds = float(get("GANTRY_AGENT_STOP_RETRY_SECONDS", "300"))
        self.log_file = get("GANTRY_AGENT_LOG_FILE", "")
        self.docker = shlex.split(get("GANTRY_AGENT_DOCKER", "docker"))
        self.poweroff = shlex.split(get("GANTRY_AGENT_POWEROFF", "systemctl poweroff"))
        self.serial = get("GANTRY_AGENT_SERIAL", "/dev/ttyS1")  # serial port 2: getSerialPortOutput(port=2)
        self.state_dir = get("GANTRY_AGENT_STATE_DIR", "/var/lib/gantry")
        self.runs_dir = get("GANTRY_AGENT_RUNS_DIR", os.path.join(self.state_dir, "runs"))
        # Cloud Storage's JSON API, where a TPU VM's agent uploads the run's output (ConsoleLog); tests: a fake.
        self.storage_url = storage_endpoint(environ)  # STORAGE_EMULATOR_HOST, as gcsfs reads it, else Google's
        self.console_upload_seconds = float(get("GANTRY_AGENT_CONSOLE_UPLOAD_SECONDS", "5"))
        self.shm_size = get("GANTRY_AGENT_SHM_SIZE", "4g")  # actors share weights through /dev/shm
        # Site-specific `docker run` flags (a mount, --cpus): the node twin mounts its local bucket with it.
        self.extra_run_args = shlex.split(get("GANTRY_AGENT_DOCKER_RUN_ARGS", ""))
        # How long one wait_for_change request hangs: also how soon a crashed trainer is noticed.
        self.watch_seconds = float(get("GANTRY_AGENT_WATCH_SECONDS", "30"))
        self.stop_grace_seconds = int(get("GANTRY_AGENT_STOP_GRACE_SECONDS", str(STOP_GRACE_SECONDS)))
        # At a shutdown, the final copy of a run's --sync folders stops after this long (what it leaves, the copies
        # every sync_seconds before hold); their program's grace is cut to what the Spot notice has left.
        self.sync_final_seconds = float(get("GANTRY_AGENT_SYNC_FINAL_SECONDS", str(SYNC_FINAL_SECONDS)))
        self.dev_dir = get("GANTRY_AGENT_DEV_DIR", "/dev")  # where the node's /dev/nvidiaN are: its GPU count
        self.restart_seconds = float(get("GANTRY_AGENT_RESTART_SECONDS", "10"))  # first crash-restart delay
        self.heartbeat_seconds = float(get("GANTRY_AGENT_HEARTBEAT_SECONDS", "60"))
        # Guest attributes are rate limited by GCE: a token bucket keeps writes to a few a minute.
        self.reports_per_minute = float(get("GANTRY_AGENT_REPORTS_PER_MINUTE", "4"))
        self.report_burst = int(get("GANTRY_AGENT_REPORT_BURST", "2"))

    def stop_grace(self, syncing: bool) -> int:
        """`docker stop -t` for a container: stop_grace_seconds, or with --sync folders what a Spot notice leaves
        besides the final copy (launch_contract.sync_stop_grace: 15 s by default)."""
        if not syncing:
            return self.stop_grace_seconds
        return sync_stop_grace(self.stop_grace_seconds, self.sync_final_seconds)
