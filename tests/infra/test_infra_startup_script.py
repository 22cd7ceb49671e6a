"""The node startup script as a VM receives it: rendered by Terraform from
infra/modules/startup_script, linted by shellcheck, then run for real by bash against stub
commands (metadata server, docker, systemctl, nvidia-smi) to check what it does on a C4 node,
on a healthy GPU node and on a GPU node whose driver cannot run the trainer's CUDA, and how a busy
first boot (apt's lists lock held, a driver still installing) is waited out with bounded retries, and
how a GPU node keeps (or says it lost) its driver across a kernel upgrade."""

import json
import os

import pytest
from gantry_agent.settings import MAX_RUN_HOURS_ENV, Settings
from infra_stubs import APT_LOCKED, KERNEL, install_stubs
from infra_tools import REPO, render_startup_script, require_tool, run
from launch_contract import NAMESPACE, RUN_KEY

pytestmark = pytest.mark.terraform

TERRAFORM_HINT = "install Terraform >= 1.9 (CI machines have 1.11)"


@pytest.fixture
def rendered(tmp_path):
    require_tool("terraform", TERRAFORM_HINT)

    def render(**variables):
        out = tmp_path / f"render-{len(list(tmp_path.glob('render-*')))}"
        out.mkdir()
        return render_startup_script(out, **variables)

    return render


@pytest.mark.parametrize("use_gpu", [False, True], ids=["cpu", "gpu"])
def test_rendered_startup_script_passes_shellcheck(rendered, tmp_path, use_gpu):
    require_tool("shellcheck", "run scripts/ci-setup.d/10-shellcheck.sh (apt-get install shellcheck)")
    script = tmp_path / "startup.sh"
    script.write_text(rendered(use_gpu=use_gpu))
    result = run(["shellcheck", "--severity=style", "--shell=bash", script])
    assert result.returncode == 0, result.stdout


class Node:
    """A sandbox in which the rendered script runs unprivileged: stubs first on PATH, and the
    script's system paths (/opt/gantry, /etc/gantry, /var/log) moved under tmp_path."""

    def __init__(self, root, script, gpu, driver_cuda="12.8", docker_installed=True, driver_installed=True, **env):
        self.root = root
        self.state = root / "state"
        self.metadata = root / "metadata"
        self.systemd = root / "systemd"
        for directory in (self.state, self.metadata, self.systemd):
            directory.mkdir(parents=True)
        install_stubs(root / "bin", gpu=gpu, docker_installed=docker_installed, driver_installed=driver_installed)
        for system_path in ("/opt/gantry", "/etc/gantry", "/var/lib/gantry", "/var/log/gantry-agent.log"):
            script = script.replace(f'"{system_path}', f'"{root}{system_path}')
        self.script = root / "startup.sh"
        self.script.write_text(script)
        system_path = "/usr/bin:/bin" if docker_installed else self._system_without_docker(root / "sysbin")
        self.env = {
            "PATH": f"{root / 'bin'}:{system_path}",
            "HOME": str(root),
            "STUB_STATE": str(self.state),
            "STUB_METADATA": str(self.metadata),
            "STUB_DRIVER_VERSION": "570.172.08",
            "STUB_DRIVER_CUDA": driver_cuda,
            "GANTRY_SYSTEMD_DIR": str(self.systemd),
            "STUB_APT_LOCKED": APT_LOCKED,
            **env,
        }

    @staticmethod
    def _system_without_docker(folder):
        """/usr/bin and /bin as links, less this machine's own docker: a VM image without Docker."""
        folder.mkdir()
        for system in ("/bin", "/usr/bin"):
            for entry in os.scandir(system):
                if entry.name != "docker" and not (folder / entry.name).exists():
                    (folder / entry.name).symlink_to(entry.path)
        return str(folder)

    def serve(self, path, text):
        target = self.metadata / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def boot(self):
        return run(["bash", self.script], cwd=self.root, env=self.env, timeout=60)

    def guest_attributes(self):
        log = self.state / "guest-attributes.log"
        return log.read_text().splitlines() if log.exists() else []

    def commands(self):
        return (self.state / "commands.log").read_text().splitlines()

    def sleeps(self):
        """The backoff delays the script slept, in (virtual) seconds."""
        return [int(line.split()[1]) for line in self.commands() if line.startswith("sleep ")]


AGENT_FILES = {"__init__.py": "", "__main__.py": "import launch_contract\nprint('agent')\n"}
CONTRACT_SOURCE = "RUN_KEY = 'gantry-run'\n"


def _healthy_node(root, script, gpu, agent=AGENT_FILES, contract=CONTRACT_SOURCE, **kwargs):
    node = Node(root, script, gpu=gpu, **kwargs)
    node.serve("instance/attributes/gantry-agent", json.dumps(agent))
    node.serve("instance/attributes/gantry-contract", contract)
    node.serve("instance/service-accounts/default/token", json.dumps({"access_token": "token-from-metadata"}))
    return node


def test_cpu_node_boots_docker_logs_in_and_installs_the_agent(rendered, tmp_path):
    node = _healthy_node(tmp_path, rendered(use_gpu=False, idle_shutdown_minutes=45, max_run_hours=2.5), gpu=False)
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr

    assert node.guest_attributes() == [
        f"instance/guest-attributes/{NAMESPACE}/boot=starting",
        f"instance/guest-attributes/{NAMESPACE}/boot=ready",
    ]
    # Registry auth: the metadata token on stdin, the fixed oauth2accesstoken user, no password on argv.
    assert (node.state / "docker-login-password").read_text() == "token-from-metadata"
    login = next(line for line in node.commands() if line.startswith("docker login"))
    assert "-u oauth2accesstoken --password-stdin https://us-central1-docker.pkg.dev" in login
    assert "token-from-metadata" not in login
    # The agent: its package's files from metadata key gantry-agent, unit gantry-agent.service, env for the agent.
    home = tmp_path / "opt/gantry"
    assert {p.name: p.read_text() for p in (home / "gantry_agent").iterdir()} == AGENT_FILES
    # ...and beside it the launch contract, under the module name the agent imports (metadata key gantry-contract)
    assert (home / "launch_contract.py").read_text() == CONTRACT_SOURCE
    unit = (node.systemd / "gantry-agent.service").read_text()
    assert f"WorkingDirectory={home}\nExecStart=/usr/bin/python3 -u -m gantry_agent\n" in unit
    assert "Restart=always" in unit and "SyslogIdentifier=gantry-agent" in unit
    env = (tmp_path / "etc/gantry/agent.env").read_text()
    # the launch contract's names, as the agent and the launcher know them (gantry.agent)
    assert f"GANTRY_RUN_METADATA_KEY={RUN_KEY}" in env and f"GANTRY_GUEST_ATTRIBUTES_NAMESPACE={NAMESPACE}" in env
    assert "GANTRY_IDLE_SHUTDOWN_MINUTES=45" in env
    # max_run_hours under the name the agent reads it by (it enforces it on a TPU VM, which has no run limit)
    assert f"{MAX_RUN_HOURS_ENV}=2.5" in env.splitlines()
    settings = dict(line.split("=", 1) for line in env.splitlines() if "=" in line)
    assert Settings(settings).max_run_hours == 2.5 and Settings(settings).idle_minutes == 45
    assert f"GANTRY_AGENT_LOG_FILE={tmp_path}/var/log/gantry-agent.log" in env
    assert "systemctl enable gantry-agent.service" in node.commands()
    assert "systemctl restart gantry-agent.service" in node.commands()
    assert not any(line.startswith("nvidia") for line in node.commands())


def test_gpu_node_registers_the_nvidia_runtime_when_missing(rendered, tmp_path):
    node = _healthy_node(
        tmp_path, rendered(use_gpu=True, required_cuda_version="12.4"), gpu=True, driver_cuda="12.8"
    )
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "nvidia-ctk runtime configure --runtime=docker" in node.commands()
    assert "systemctl restart docker" in node.commands()
    assert "runs CUDA up to 12.8 (trainer image needs 12.4): ok" in result.stdout
    assert node.guest_attributes()[-1] == "instance/guest-attributes/gantry/boot=ready"


def test_gpu_node_fails_loudly_when_the_driver_is_older_than_the_image_cuda(rendered, tmp_path):
    """The required CUDA is the CUDA image's (docker/torch.json, as the root module passes it): a driver 570 that
    runs CUDA 12.8 passed the old check (required 12.8) and then failed at the image's first CUDA 13 call."""
    cuda = json.loads((REPO / "docker" / "torch.json").read_text())["cuda"]
    node = _healthy_node(tmp_path, rendered(use_gpu=True), gpu=True, driver_cuda="12.8")
    result = node.boot()
    assert result.returncode == 1
    message = f"NVIDIA driver 570.172.08 runs CUDA up to 12.8, but the trainer image needs CUDA {cuda} (docker/torch.json)"
    assert message in result.stdout
    assert node.guest_attributes()[-1].startswith(f"instance/guest-attributes/gantry/boot=error: {message}")
    assert not (node.systemd / "gantry-agent.service").exists(), (
        "a node that cannot run the image must not start the agent"
    )


@pytest.mark.parametrize("missing", ["gantry-agent", "gantry-contract"])
def test_missing_agent_metadata_reports_an_error(rendered, tmp_path, missing):
    node = _healthy_node(tmp_path, rendered(use_gpu=False), gpu=False)
    (node.metadata / "instance/attributes" / missing).unlink()
    result = node.boot()
    assert result.returncode == 1
    assert f"instance metadata key {missing} is missing" in node.guest_attributes()[-1]
    assert not (node.systemd / "gantry-agent.service").exists()


def test_the_installed_agent_imports_the_installed_contract_on_a_bare_python(rendered, tmp_path):
    """What Terraform ships (infra/locals.tf: the package's files as one JSON value, and the contract) is all the
    agent needs on the VM's system Python: no venv, no site-packages, only the folder the startup script wrote into,
    where the unit runs `python3 -m gantry_agent`."""
    from gantry_agent import shipped_files

    node = _healthy_node(tmp_path, rendered(use_gpu=False), gpu=False, agent=shipped_files(),
                         contract=(REPO / "packages/launch_contract.py").read_text())
    assert node.boot().returncode == 0
    home = tmp_path / "opt/gantry"
    # -I: no PYTHONPATH, no user site; -S: no site-packages (the venv's launch_contract) either. The working
    # directory comes first on sys.path, as for `python3 -m` in the unit's WorkingDirectory.
    probe = ("import sys; sys.path.insert(0, ''); import gantry_agent.agent as agent, gantry_agent.__main__, "
             "launch_contract; assert agent.RunSpec is launch_contract.RunSpec; print(launch_contract.__file__)")
    result = run(["python3", "-I", "-S", "-c", probe], cwd=home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == str(home / "launch_contract.py")


def test_a_bundle_that_is_not_python_files_is_refused(rendered, tmp_path):
    """A file name with a folder in it, or source that does not parse, stops the boot in one line: nothing half
    installed, no agent started."""
    for bad in ({"../evil.py": "x = 1\n"}, {"agent.py": "def (:\n"}):
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        node = _healthy_node(root, rendered(use_gpu=False), gpu=False, agent=bad)
        assert node.boot().returncode == 1
        assert "the agent in metadata key gantry-agent is not a JSON object of Python files" in \
            node.guest_attributes()[-1]
        assert not (node.systemd / "gantry-agent.service").exists()


LOCKED = "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 1234 (apt-get)"


def test_a_held_apt_lists_lock_is_waited_out_and_every_attempt_reported(rendered, tmp_path):
    # cloud-init / apt-daily hold /var/lib/apt/lists/lock for the first three tries of a fresh VM.
    node = _healthy_node(tmp_path, rendered(use_gpu=False), gpu=False, docker_installed=False,
                         STUB_APT_LOCKED_TIMES="3")
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr
    commands = node.commands()
    updates = [c for c in commands if c.startswith("apt-get") and c.endswith("update -q")]
    assert len(updates) == 4 and node.sleeps() == [5, 10, 20]
    assert any("install -y -q --no-install-recommends docker.io" in c for c in commands)
    ns = f"instance/guest-attributes/{NAMESPACE}/boot"
    assert node.guest_attributes() == [
        f"{ns}=starting",
        *(f"{ns}=retrying: apt-get update (attempt {n}/8): {LOCKED}" for n in (1, 2, 3)),
        f"{ns}=ready",
    ]
    assert "apt-get update failed (attempt 3/8)" in result.stdout and "retrying in 20 s" in result.stdout


def test_apt_gives_up_after_a_bounded_number_of_attempts_and_says_why(rendered, tmp_path):
    node = _healthy_node(tmp_path, rendered(use_gpu=False), gpu=False, docker_installed=False,
                         STUB_APT_LOCKED_TIMES="1000")
    result = node.boot()
    assert result.returncode == 1
    assert len([c for c in node.commands() if c.endswith("update -q")]) == 8
    assert sum(node.sleeps()) == 5 + 10 + 20 + 40 + 60 + 60 + 60  # about 4 minutes, then the node says so
    assert node.guest_attributes()[-1] == (
        f"instance/guest-attributes/{NAMESPACE}/boot=error: apt-get update failed 8 times: {LOCKED}")
    assert not (node.systemd / "gantry-agent.service").exists()


def test_a_driver_installed_during_the_first_boot_is_waited_for(rendered, tmp_path):
    # nvidia-smi appears 70 s into the boot (virtual time): the fourth check finds it.
    node = _healthy_node(tmp_path, rendered(use_gpu=True, required_cuda_version="12.4"), gpu=True,
                         driver_installed=False, STUB_NVIDIA_AT_SECONDS="70")
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr
    assert node.sleeps() == [5, 10, 20, 40]
    ns = f"instance/guest-attributes/{NAMESPACE}/boot"
    assert node.guest_attributes() == [
        f"{ns}=starting",
        *(f"{ns}=retrying: waiting for the NVIDIA driver (attempt {n}/12): nvidia-smi not found yet"
          for n in (1, 2, 3, 4)),
        f"{ns}=ready",
    ]
    assert "runs CUDA up to 12.8 (trainer image needs 12.4): ok" in result.stdout


def test_a_node_without_a_driver_fails_after_the_bounded_wait(rendered, tmp_path):
    node = _healthy_node(tmp_path, rendered(use_gpu=True), gpu=True, driver_installed=False)
    result = node.boot()
    assert result.returncode == 1
    assert len(node.sleeps()) == 11 and sum(node.sleeps()) == 5 + 10 + 20 + 40 + 60 * 7
    last = node.guest_attributes()[-1]
    assert last.startswith(f"instance/guest-attributes/{NAMESPACE}/boot=error: nvidia-smi not found after 12 attempts")
    assert "gpu_image_family" in last


@pytest.mark.parametrize("use_gpu", [False, True])
def test_every_setting_the_boot_writes_for_the_agent_is_read_by_it(rendered, use_gpu):
    """agent.env carries only what the agent reads: a name it ignores is a setting that silently does nothing."""
    import re
    from pathlib import Path

    import gantry_agent.settings

    script = rendered(use_gpu=use_gpu)
    block = script.split('cat >"$agent_env" <<ENV\n', 1)[1].split("\nENV\n", 1)[0]
    written = re.findall(r"^([A-Z_]+)=", block, re.MULTILINE)
    agent = Path(gantry_agent.settings.__file__).read_text()  # every setting is read there
    assert written and [name for name in written if f'"{name}"' not in agent] == []


@pytest.mark.parametrize("use_gpu", [False, True], ids=["cpu", "gpu"])
def test_the_boot_never_waits_for_cloud_init(rendered, tmp_path, use_gpu):
    """This script is google-startup-scripts.service, wanted by multi-user.target; cloud-init's final stage is
    ordered after that target (a target is ordered after what it wants: systemd.target(5)), so waiting for
    cloud-init here waits for itself until a timeout (GoogleCloudPlatform/guest-agent#84). apt's lock retries
    cover what cloud-init still runs, and a boot with no wait is no slower."""
    node = _healthy_node(tmp_path, rendered(use_gpu=use_gpu, required_cuda_version="12.4"), gpu=use_gpu)
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr
    assert not [c for c in node.commands() if c.startswith("cloud-init")]
    assert node.sleeps() == []


def test_a_gpu_node_holds_its_running_kernel_and_remembers_it(rendered, tmp_path):
    """Unattended upgrades must not install a kernel the NVIDIA module was not built for
    (GoogleCloudPlatform/compute-gpu-installation#25): the running kernel's packages and the version-less metas
    that pull newer ones are held; an older kernel still installed and a removed one's config are left alone."""
    node = _healthy_node(tmp_path, rendered(use_gpu=True, required_cuda_version="12.4"), gpu=True)
    result = node.boot()
    assert result.returncode == 0, result.stdout + result.stderr
    (hold,) = [c for c in node.commands() if c.startswith("apt-mark")]
    assert hold.split() == ["apt-mark", "hold", "linux-gcp", "linux-headers-gcp", "linux-image-gcp",
                            f"linux-image-{KERNEL}", f"linux-headers-{KERNEL}", f"linux-modules-{KERNEL}"]
    assert f"kernel {KERNEL} held against upgrades" in result.stdout
    assert (tmp_path / "var/lib/gantry/nvidia-kernel").read_text() == KERNEL + "\n"


def test_a_cpu_node_leaves_its_kernel_to_unattended_upgrades(rendered, tmp_path):
    node = _healthy_node(tmp_path, rendered(use_gpu=False), gpu=False)
    assert node.boot().returncode == 0
    assert not [c for c in node.commands() if c.startswith(("apt-mark", "dpkg-query"))]


@pytest.mark.parametrize("kernel_changed", [True, False], ids=["kernel-changed", "driver-missing"])
def test_a_gpu_node_whose_module_does_not_load_says_which_and_the_remedy(rendered, tmp_path, kernel_changed):
    """nvidia-smi is there but cannot reach the driver: after a kernel change (the node last loaded the module
    on another kernel) the line names both kernels and the DKMS rebuild; otherwise it says the driver is missing."""
    node = _healthy_node(tmp_path, rendered(use_gpu=True), gpu=True, STUB_NVIDIA_NO_MODULE="1")
    if kernel_changed:
        (tmp_path / "var/lib/gantry").mkdir(parents=True)
        (tmp_path / "var/lib/gantry/nvidia-kernel").write_text("6.5.0-1010-gcp\n")
    result = node.boot()
    assert result.returncode == 1
    last = node.guest_attributes()[-1]
    ns = f"instance/guest-attributes/{NAMESPACE}/boot"
    if kernel_changed:
        assert last.startswith(f"{ns}=error: kernel changed from 6.5.0-1010-gcp to {KERNEL} since the NVIDIA "
                               "driver last loaded")
        assert f"sudo apt-get install -y linux-headers-{KERNEL} && sudo dkms autoinstall && sudo reboot" in last
    else:
        assert last.startswith(f"{ns}=error: NVIDIA driver missing on kernel {KERNEL}")
        assert "kernel changed" not in last
    assert "make apply" in last
    assert not (node.systemd / "gantry-agent.service").exists()
