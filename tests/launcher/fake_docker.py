"""A stand-in for the docker CLI when no engine runs: containers are local processes.

The node agent calls it exactly as it calls docker (GANTRY_AGENT_DOCKER points here):

    login -u USER --password-stdin URL    records the token it was given
    pull IMAGE                            records; fails for an image whose name contains "missing"
    run -d --name N [-e K=V] [-v H:C] ... IMAGE ARGS...
                                          starts FAKE_DOCKER_ENTRYPOINT ARGS (default: python -m selfplay
                                          launch ARGS), with --entrypoint P this venv's P ARGS, or with
                                          --entrypoint "" ARGS alone (the command as given), as a process
                                          in its own session, output to a log; -e values under a container
                                          path of -v are moved to the host path; --gpus and --privileged are
                                          recorded; a flag docker_run_args never passes is refused (RUN_FLAGS).
                                          With FAKE_DOCKER_IMAGE_WORKDIR (the image's WORKDIR) the process
                                          runs in a host folder standing in for it, N.workdir, where each -v
                                          mounted below the WORKDIR is a link to its host folder
    inspect --format F N                  "STATUS EXITCODE" (running | exited), exit 1 if no such container
    image inspect --format F IMAGE        {{.Config.User}}: FAKE_DOCKER_IMAGE_USER (the image's USER; default:
                                          none, i.e. root); {{.Config.WorkingDir}}: FAKE_DOCKER_IMAGE_WORKDIR
                                          (default: none, i.e. /)
    cp N:PATH -                           the file at PATH (under a -v, or the WORKDIR) as a tar archive
    logs -f N                             the output so far, then follows it until the process ends
    stop -t T N                           SIGTERM, SIGKILL after T seconds
    rm -f N                               kills and forgets

State lives in FAKE_DOCKER_STATE (a folder): N.json per container, N.log, and calls.jsonl with
every command line, which tests read.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

STATE = Path(os.environ.get("FAKE_DOCKER_STATE", "/tmp/fake-docker"))


def record(name: str) -> dict | None:
    path = STATE / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def save(name: str, data: dict) -> None:
    tmp = STATE / f".{name}.json.tmp"
    tmp.write_text(json.dumps(data))
    os.replace(tmp, STATE / f"{name}.json")


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def status(name: str) -> tuple[str, int]:
    data = record(name)
    if data is None:
        return "missing", 0
    if data["status"] == "running" and not alive(data.get("supervisor")):
        return "exited", 137  # killed from outside (a "reboot" in tests)
    return data["status"], data.get("exit_code", 0)


# Every flag the agent's docker_run_args passes (TPU_RUN_ARGS and GANTRY_AGENT_DOCKER_RUN_ARGS included), and how
# many values each takes; anything else is refused as docker refuses it, so a new flag cannot slip past the tests.
RUN_FLAGS = {"-d": 0, "--init": 0, "--privileged": 0, "--name": 1, "-e": 1, "-v": 1, "--network": 1, "--shm-size": 1,
             "--label": 1, "--gpus": 1, "--entrypoint": 1, "--user": 1, "--ulimit": 1}


def cmd_run(argv: list[str]) -> int:
    name, env, volumes, flags, i = "", {}, {}, {}, 0
    while i < len(argv) and argv[i].startswith("-"):
        flag = argv[i]
        if flag not in RUN_FLAGS:
            print(f"unknown flag: {flag}", file=sys.stderr)
            return 125
        if RUN_FLAGS[flag] == 0:
            flags[flag] = True
            i += 1
            continue
        value = argv[i + 1]
        flags[flag] = value
        if flag == "--name":
            name = value
        elif flag == "-e":
            key, _, val = value.partition("=")
            env[key] = val
        elif flag == "-v":
            host, _, container = value.partition(":")
            volumes[container] = host
        i += 2
    image, args = argv[i], argv[i + 1:]
    if record(name) and status(name)[0] == "running":
        print(f"docker: Error response from daemon: Conflict. The container name \"/{name}\" is already in use.",
              file=sys.stderr)
        return 125
    for key, val in env.items():
        for container, host in volumes.items():
            if val == container or val.startswith(container + "/"):
                env[key] = host + val[len(container):]
    if flags.get("--entrypoint") == "":  # the image's entry point cleared: the arguments are the command
        entry = []
    elif "--entrypoint" in flags:  # the agent's own program (torchrun): from this venv, as the image has it on PATH
        entry = [str(Path(sys.executable).parent / flags["--entrypoint"])]
    else:  # the image's entry point
        entry = shlex.split(os.environ.get("FAKE_DOCKER_ENTRYPOINT", "")) or [sys.executable, "-m", "selfplay", "launch"]
    workdir = os.environ.get("FAKE_DOCKER_IMAGE_WORKDIR", "")
    cwd = STATE
    if workdir:  # the image's WORKDIR, on this host: a folder of its own with the mounts below it linked in
        cwd = STATE / f"{name}.workdir"
        shutil.rmtree(cwd, ignore_errors=True)
        cwd.mkdir()
        for container, host in volumes.items():
            if container.startswith(workdir.rstrip("/") + "/"):
                link = cwd / container[len(workdir.rstrip("/")) + 1:]
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(host)
    save(name, {"name": name, "image": image, "command": [*entry, *args], "env": env, "status": "running",
                "gpus": flags.get("--gpus"), "privileged": "--privileged" in flags, "entrypoint": flags.get(
                    "--entrypoint"), "volumes": volumes, "workdir": workdir, "cwd": str(cwd)})
    supervisor = subprocess.Popen([sys.executable, __file__, "_supervise", name], start_new_session=True,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    data = record(name)
    data["supervisor"] = supervisor.pid
    save(name, data)
    print(f"fake-{name}")
    return 0


def cmd_supervise(name: str) -> int:
    data = record(name)
    with open(STATE / f"{name}.log", "a") as log:
        try:
            child = subprocess.Popen(data["command"], env={**os.environ, **data["env"]}, stdout=log,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=data["cwd"])
        except OSError as exc:  # no such program: docker's own message and exit code
            log.write(f"docker: Error response from daemon: failed to create task: exec: {exc}\n")
            data.update(status="exited", exit_code=127)
            save(name, data)
            return 0
        data = record(name)
        data["pid"] = child.pid
        data.setdefault("supervisor", os.getpid())
        save(name, data)
        code = child.wait()
    data = record(name)
    if data is not None:
        data.update(status="exited", exit_code=code if code >= 0 else 128 - code)
        save(name, data)
    return 0


def cmd_logs(name: str) -> int:
    path = STATE / f"{name}.log"
    deadline = time.monotonic() + 5
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    with open(path, errors="replace") as log:
        while True:
            line = log.readline()
            if line:
                sys.stdout.write(line)
                sys.stdout.flush()
                continue
            if status(name)[0] != "running":
                sys.stdout.write(log.read())
                return 0
            time.sleep(0.2)


def wait_exited(name: str, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if status(name)[0] != "running":
            return True
        time.sleep(0.1)
    return False


def kill_all(name: str) -> None:
    data = record(name) or {}
    for pid in (data.get("supervisor"), data.get("pid")):
        if alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL) if pid == data.get("supervisor") else os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def cmd_stop(seconds: int, name: str) -> int:
    data = record(name)
    if data is None:
        return 1
    if status(name)[0] == "running":
        deadline = time.monotonic() + 5
        while not data.get("pid") and time.monotonic() < deadline:
            time.sleep(0.1)
            data = record(name)
        if data.get("pid"):
            os.kill(data["pid"], signal.SIGTERM)
        if not wait_exited(name, seconds):
            kill_all(name)
            wait_exited(name, 5)
    print(name)
    return 0


def cmd_cp(source: str) -> int:
    """`docker cp N:PATH -`: the file as a tar archive on stdout, as docker writes it."""
    name, _, path = source.partition(":")
    data = record(name)
    host = None
    if data is not None:
        mounts = {**({data["workdir"]: data["cwd"]} if data.get("workdir") else {}), **data.get("volumes", {})}
        for container in sorted(mounts, key=len, reverse=True):
            if path == container or path.startswith(container.rstrip("/") + "/"):
                host = Path(mounts[container] + path[len(container.rstrip("/")):])
                break
    if host is None or not host.is_file():
        print(f"Error response from daemon: Could not find the file {path} in container {name}", file=sys.stderr)
        return 1
    with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as tar:
        tar.add(host.resolve(), arcname=os.path.basename(path))
    return 0


def main(argv: list[str]) -> int:
    STATE.mkdir(parents=True, exist_ok=True)
    if argv and argv[0] != "_supervise":
        with open(STATE / "calls.jsonl", "a") as calls:
            calls.write(json.dumps(argv) + "\n")
    verb, rest = (argv[0], argv[1:]) if argv else ("", [])
    if verb == "login":
        token = sys.stdin.read()
        (STATE / "login-token").write_text(token)
        return 0 if token else 1
    if verb == "pull":
        if "missing" in rest[-1]:
            print(f"Error response from daemon: manifest for {rest[-1]} not found", file=sys.stderr)
            return 1
        return 0
    if verb == "run":
        return cmd_run(rest)
    if verb == "_supervise":
        return cmd_supervise(rest[0])
    if verb == "inspect":
        state, code = status(rest[-1])
        if state == "missing":
            print(f"Error: No such object: {rest[-1]}", file=sys.stderr)
            return 1
        print(f"{state} {code}")
        return 0
    if verb == "image" and rest[:1] == ["inspect"]:
        fmt = rest[rest.index("--format") + 1] if "--format" in rest else ""
        print(os.environ.get("FAKE_DOCKER_IMAGE_WORKDIR" if "WorkingDir" in fmt else "FAKE_DOCKER_IMAGE_USER", ""))
        return 0
    if verb == "cp":
        return cmd_cp(rest[0])
    if verb == "logs":
        return cmd_logs(rest[-1])
    if verb == "stop":
        return cmd_stop(int(rest[rest.index("-t") + 1]) if "-t" in rest else 10, rest[-1])
    if verb == "rm":
        if record(rest[-1]) is not None:
            kill_all(rest[-1])
            (STATE / f"{rest[-1]}.json").unlink(missing_ok=True)
            (STATE / f"{rest[-1]}.log").unlink(missing_ok=True)
        return 0
    print(f"fake docker: unsupported command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
