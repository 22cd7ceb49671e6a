"""The docker CLI on the node, and the `docker run` of a run spec: the contract's environment, GPUs, TPU devices,
the --sync folders, and torchrun's rendezvous or a plain command when the launch runs your own program."""

from __future__ import annotations

import glob
import os
import posixpath
import subprocess

from launch_contract import (
    DEADLINE_ENV,
    GANTRY_GPUS_PER_NODE_ENV,
    GANTRY_NODE_IPS_ENV,
    GANTRY_NODE_RANK_ENV,
    GANTRY_NUM_NODES_ENV,
    MASTER_ADDR_ENV,
    MASTER_PORT_ENV,
    NNODES_ENV,
    NODE_RANK_ENV,
    NPROC_PER_NODE_ENV,
    PJRT_DEVICE_ENV,
    RAY_ADDRESS_ENV,
    RUN_DIR_ENV,
    SYNC_FOLDER,
    RunSpec,
    check_env_pair,
)

from . import ray_cluster
from .settings import Settings
from .sync import local_folder


class Docker:
    """The docker CLI on the node (GANTRY_AGENT_DOCKER, a command line: tests put fake_docker there)."""

    def __init__(self, command: list[str]):
        self.command = command

    def __call__(self, *args, input_text=None, timeout=120) -> subprocess.CompletedProcess:
        return subprocess.run([*self.command, *args], input=input_text, capture_output=True, text=True,
                              timeout=timeout, check=False)

    def checked(self, *args, timeout=120) -> None:
        """Run it; RuntimeError with the end of docker's own message when it fails."""
        result = self(*args, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"docker {args[0]} failed: {(result.stderr or result.stdout).strip()[-300:]}")

    def status(self, name: str) -> tuple[str, int | None]:
        """(running | exited | created | ..., its exit code), or ("missing", None) when there is no such container."""
        result = self("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name, timeout=30)
        if result.returncode != 0:
            return "missing", None
        status, _, code = result.stdout.strip().partition(" ")
        return status, int(code or 0)

    def running(self, name: str) -> bool:
        return self.status(name)[0] == "running"

    def login(self, registry_host: str, token: str) -> None:
        result = self("login", "-u", "oauth2accesstoken", "--password-stdin", f"https://{registry_host}",
                      input_text=token, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"docker login to {registry_host} refused the node's token "
                               "(the node service account needs roles/artifactregistry.reader)")

    def prepare_run_folder(self, folder: str, image: str) -> None:
        """Make the run folder writable for the image's user: the agent is root, the trainer is not.

        The image declares its user (Dockerfile USER 1000:1000): a numeric one gets the folder; a named
        one (unknown on this host) gets a folder anyone may write, as on a single-tenant VM."""
        os.makedirs(folder, exist_ok=True)
        user = self("image", "inspect", "--format", "{{.Config.User}}", image, timeout=60).stdout.strip()
        uid, _, gid = user.partition(":")
        if not user or uid in ("0", "root"):
            return
        if uid.isdigit() and (not gid or gid.isdigit()):
            for root, dirs, files in os.walk(folder):  # a folder left by an earlier launch may hold root's files
                for path in [root, *(os.path.join(root, n) for n in dirs + files)]:
                    os.chown(path, int(uid), int(gid or uid))
        else:
            os.chmod(folder, 0o1777)
            for root, dirs, files in os.walk(os.path.join(folder, SYNC_FOLDER)):  # restored files it rewrites
                for path in [root, *(os.path.join(root, n) for n in dirs)]:
                    os.chmod(path, 0o777)
                for name in files:
                    os.chmod(os.path.join(root, name), 0o666)

    def workdir(self, image: str) -> str:
        """The image's WORKDIR, where its program runs ("/" when it declares none)."""
        result = self("image", "inspect", "--format", "{{.Config.WorkingDir}}", image, timeout=60)
        if result.returncode != 0:
            raise RuntimeError(f"docker image inspect failed: {(result.stderr or result.stdout).strip()[-300:]}")
        return result.stdout.strip() or "/"

    def copy_out(self, name: str, path: str) -> bytes | None:
        """`docker cp NAME:PATH -`: the file as a tar archive (running or exited container alike); None if absent."""
        try:
            result = subprocess.run([*self.command, "cp", f"{name}:{path}", "-"], capture_output=True, timeout=60,
                                    check=False)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout if result.returncode == 0 else None

    def attach(self, name: str) -> subprocess.Popen:
        """`docker attach`: the container's output as it is written, bytes not lines. `docker logs` waits for a line's
        end (the log driver splits on newlines), so a progress bar redrawn with \r shows there only when it ends."""
        return subprocess.Popen([*self.command, "attach", "--no-stdin", "--sig-proxy=false", name],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def follow(self, name: str) -> subprocess.Popen:
        """`docker logs -f`: the container's output so far, then as it comes, until it ends."""
        return subprocess.Popen([*self.command, "logs", "-f", name], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")



# A TPU VM's container. The chips are /dev/accel* (v2-v4) or VFIO groups under /dev/vfio (v5e and later), and libtpu
# pins its buffers, so it needs an unlimited memlock. --privileged (what Google's "Run TPU workloads in a Docker
# container" guide uses) passes every host device, but grants capabilities to a root process only: the image's
# USER 1000 would get neither CAP_IPC_LOCK nor access to root-owned device nodes. So the container runs as root
# (the agent, root too, owns the run folder) with memlock unlimited, as Google's guide runs it (its images are root).
# Not yet run on a real TPU (docs/ARCHITECTURE.md).
TPU_RUN_ARGS = ["--privileged", "--user", "0:0", "--ulimit", "memlock=-1:-1"]


def gpus_on_node(dev_dir: str) -> int:
    """The node's NVIDIA GPUs: its /dev/nvidia0, /dev/nvidia1, ... (the driver's device nodes; `--gpus all` passes
    every one of them to the container)."""
    return len(glob.glob(os.path.join(dev_dir, "nvidia[0-9]*")))


def docker_run_args(spec: RunSpec, run_folder: str, s: Settings, workdir: str = "/") -> list[str]:
    """`docker run` of the spec: ``workdir`` is the image's WORKDIR (Docker.workdir), where the --sync folders go."""
    env = {NNODES_ENV: spec.nnodes, NODE_RANK_ENV: spec.node_rank, MASTER_ADDR_ENV: spec.master_addr,
           MASTER_PORT_ENV: spec.master_port,
           GANTRY_NODE_RANK_ENV: spec.node_rank, GANTRY_NUM_NODES_ENV: spec.nnodes,
           GANTRY_GPUS_PER_NODE_ENV: (len(spec.gpu_ids) or gpus_on_node(s.dev_dir)) if spec.gpu else 0}
    if spec.node_addrs:
        env[GANTRY_NODE_IPS_ENV] = ",".join(spec.node_addrs)
    if spec.nproc_per_node:
        env[NPROC_PER_NODE_ENV] = spec.nproc_per_node
    if spec.run_dir:
        env[RUN_DIR_ENV] = spec.run_dir
    if spec.deadline is not None:
        env[DEADLINE_ENV] = f"{spec.deadline:.0f}"
    if spec.ray:
        env[RAY_ADDRESS_ENV] = ray_cluster.address(spec)
    env.update(check_env_pair(pair) for pair in spec.env)  # the contract keeps its own names out of them
    # --init: docker's init is PID 1, reaps orphans and passes SIGTERM on, so the program is not PID 1, for which
    # the kernel drops a signal it has no handler for (a plain `python train.py` would ignore docker stop until
    # SIGKILL, and never checkpoint) and whose children see PID 1 as their parent.
    args = ["run", "-d", "--name", spec.container, "--init", "--network", "host", "--shm-size",
            spec.shm_size or (ray_cluster.shm_size() if spec.ray else s.shm_size),
            "--label", f"gantry-run={spec.run_id}", "-v", f"{run_folder}:/runs", *s.extra_run_args]
    for folder in spec.sync:  # the host keeps them (sync.py): they outlive the container and go to the bucket
        args += ["-v", f"{local_folder(run_folder, folder)}:{posixpath.join(workdir, folder)}"]
    if spec.gpu:  # docker's device list is one value, quoted, since its commas would split it
        args += ["--gpus", f'"device={",".join(map(str, spec.gpu_ids))}"' if spec.gpu_ids else "all"]
    if spec.cpus:
        args += ["--cpus", f"{spec.cpus:g}"]
    if spec.tpu:
        args += TPU_RUN_ARGS
        env[PJRT_DEVICE_ENV] = "TPU"
    for key, value in env.items():
        args += ["-e", f"{key}={value}"]
    if spec.torchrun:  # whatever the image's entry point is: the rendezvous is the agent's to wire
        return [*args, "--entrypoint", "torchrun", spec.image, *torchrun_args(spec)]
    if spec.command:  # the args as given, in the image's WORKDIR, without its ENTRYPOINT (in Ray's cluster: Ray's)
        return [*args, "--entrypoint", "", spec.image, *(ray_cluster.command(spec) if spec.ray else spec.args)]
    return [*args, spec.image, *spec.args]


def torchrun_args(spec: RunSpec) -> list[str]:
    """torchrun's static rendezvous at node 0, from the same fields as the environment, then the program.
    Ranks per node: the launch's --nproc-per-node, else one per GPU on a GPU node, else one."""
    nproc = spec.nproc_per_node or ("gpu" if spec.gpu else 1)
    return [f"--nnodes={spec.nnodes}", f"--node-rank={spec.node_rank}", f"--master-addr={spec.master_addr}",
            f"--master-port={spec.master_port}", f"--nproc-per-node={nproc}", *spec.args]

