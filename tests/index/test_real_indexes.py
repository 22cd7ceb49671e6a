"""What the real package indexes say about what Gantry installs (issue #32, point 7).

A stand-in answers what we believed when we wrote it; these tests ask PyPI, PyTorch's CPU index, Debian's and
Ubuntu's archives themselves, whenever they answer, and skip naming the host and the reason where they do not
(a refused connection, a 10 s timeout). Every input is read from the file that installs it (docker/torch.json
through docker/torch_pins.py, the Dockerfiles, selfplay.hardware's XLA pins, scripts/docker_base.sh, the startup
script as Terraform renders it), and every answer from the index: nothing here is a copied list.

Stdlib HTTP only (urllib); each URL is fetched once per test session.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import lzma
import re
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from checkout import REPO
from selfplay.hardware import xla_requirements

pytestmark = pytest.mark.index

TIMEOUT_S = 10
DOCKERFILES = sorted((REPO / "docker").glob("Dockerfile.*"))
PEP691 = "application/vnd.pypi.simple.v1+json"
# The images are linux/amd64 on python:3.11 (images.PLATFORM, the Dockerfiles' BASE_IMAGE): the wheel they need.
IMAGE_WHEEL = re.compile(r"-cp311-cp311-(manylinux[^-]*|linux)_x86_64\.whl$")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


torch_pins = _load("torch_pins", REPO / "docker" / "torch_pins.py")
PINS = torch_pins.load()

# ---- HTTP: one fetch per URL per session; an index that does not answer is a skip with its reason ----------------

_answers: dict[tuple, tuple] = {}


def get(url: str, accept: str | None = None, byte_range: str | None = None) -> tuple[bytes, str] | None:
    """(body, content type), None for an HTTP 404 (an answer: not there), or a skip naming the host and why."""
    key = (url, accept, byte_range)
    if key not in _answers:
        request = urllib.request.Request(url, headers={k: v for k, v in
                                                       (("Accept", accept), ("Range", byte_range)) if v})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                _answers[key] = ("ok", (response.read(), response.headers.get("Content-Type", "")))
        except urllib.error.HTTPError as e:
            _answers[key] = ("ok", None) if e.code == 404 else ("skip", f"HTTP {e.code}")
        except (urllib.error.URLError, OSError) as e:  # refused, no DNS, timeout: the index is out of reach here
            _answers[key] = ("skip", str(getattr(e, "reason", e))[:120])
    state, value = _answers[key]
    if state == "skip":
        pytest.skip(f"{urllib.parse.urlsplit(url).netloc} cannot be reached from here ({value}): {url} unchecked")
    return value


def index_files(index_url: str, project: str) -> list[dict]:
    """The project's files on a PEP 503/691 simple index: [{'filename', 'url', ...}], yanked ones left out."""
    url = f"{index_url.rstrip('/')}/{re.sub(r'[-_.]+', '-', project).lower()}/"
    answer = get(url, accept=f"{PEP691}, text/html;q=0.1")
    if answer is None:
        return []
    body, content_type = answer
    if PEP691 in content_type:
        return [f for f in json.loads(body)["files"] if not f.get("yanked")]
    html = body.decode()
    return [{"filename": urllib.parse.unquote(name), "url": urllib.parse.urljoin(url, href.split("#")[0])}
            for href, name in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', html)]


def wheels(files: list[dict], requirement: str, image: bool) -> list[dict]:
    """The wheels of NAME==VERSION (a local label such as +cpu matches, as pip's == does); for an image, only
    those a linux/amd64 python3.11 installs."""
    name, version = requirement.split("==")
    stem = re.sub(r"[-_.]+", "_", name).lower()
    found = []
    for f in files:
        parts = f["filename"].removesuffix(".whl").split("-")
        if (f["filename"].endswith(".whl") and parts[0].lower() == stem and parts[1].split("+")[0] == version
                and (not image or IMAGE_WHEEL.search(f["filename"]))):
            found.append(f)
    return found


# ---- 1. every torch pin resolves on the index its install uses ---------------------------------------------------

def install_cases() -> list[tuple[str, str, str, bool]]:
    """(who installs it, requirement, index, is an image) for every torch pin Gantry installs, read from the code."""
    requirement = torch_pins.requirement(PINS)
    cases = [("Makefile (docker/torch_pins.py install): the CPU index", requirement, PINS["cpu_index_url"], False),
             # where the CPU index is out of reach the laptop falls back to pip's index: CPU-only on macOS
             ("Makefile: the fallback, PyPI", requirement, PINS["cuda_index_url"], False)]
    for dockerfile in DOCKERFILES:
        text = dockerfile.read_text()
        flavour = re.search(r"^RUN sh \S*install_torch\.sh (\w+)", text, flags=re.MULTILINE).group(1)
        pip_index = re.search(r"PIP_INDEX_URL=(\S+)", text).group(1)  # torch's dependencies and torch_xla
        pins = xla_requirements() if flavour == "tpu" else [requirement]
        for pin in pins:
            index = torch_pins.index_for(flavour, PINS) if pin.startswith("torch==") else pip_index
            cases.append((f"docker/{dockerfile.name}", pin, index, True))
    for pin in xla_requirements():  # scripts/xla_venv.sh: torch from the CPU index, torch_xla from PyPI
        cases.append(("scripts/xla_venv.sh", pin, PINS["cpu_index_url"] if pin.startswith("torch==")
                      else PINS["cuda_index_url"], False))
    return cases


@pytest.mark.parametrize(("who", "requirement", "index", "image"), install_cases(),
                         ids=lambda v: v if isinstance(v, str) and "://" not in v else None)
def test_every_torch_pin_resolves_on_the_index_its_install_uses(who, requirement, index, image):
    files = index_files(index, requirement.split("==")[0])
    found = wheels(files, requirement, image)
    assert found, (f"{who} installs {requirement} from {index}, which has no such wheel"
                   f"{' for linux/amd64 cp311' if image else ''} ({len(files)} files listed)")


def project_python_cases() -> list[tuple[str, str]]:
    from gantry.projects.pins import PYTHONS

    return [(python, index) for python in PYTHONS for index in (PINS["cpu_index_url"], PINS["cuda_index_url"])]


@pytest.mark.parametrize(("python", "index"), project_python_cases())
def test_every_python_a_project_may_ask_for_has_the_images_torch(python, index):
    """A project's .python-version (gantry.projects.pins.PYTHONS) builds its image's torch layer for that Python, from
    the CPU index (cpu) or PyPI (cuda): each must list a linux/amd64 wheel of the pin for it."""
    tag = "cp" + python.replace(".", "")
    files = index_files(index, "torch")
    found = [f for f in wheels(files, torch_pins.requirement(PINS), image=False)
             if re.search(rf"-{tag}-{tag}-(manylinux[^-]*|linux)_x86_64\.whl$", f["filename"])]
    assert found, f"{index} has no linux/amd64 {tag} wheel of {torch_pins.requirement(PINS)} for .python-version {python}"


@pytest.mark.timeout(300)
def test_a_projects_requirements_are_judged_for_the_python_it_asks_for_not_the_one_running_gantry(tmp_path,
                                                                                                  monkeypatch):
    """alpha-zero-general's tensorflow-io-gcs-filesystem==0.26.0 (Requires-Python <3.11, >=3.7): wheels for 3.10,
    none the 3.11 image can take. pip before 25.0 checked Requires-Python against the Python that runs it, and
    refused it for .python-version 3.10 too (pyproject's cloud extra asks for pip>=25.0)."""
    from gantry.errors import GantryError
    from gantry.projects import pins as project_pins
    from gantry.projects import resolve as project_resolve

    get("https://pypi.org/simple/tensorflow-io-gcs-filesystem/")  # a skip naming PyPI when it does not answer
    line = project_pins.Line("requirements.txt", 38, "tensorflow-io-gcs-filesystem==0.26.0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # no set remembered from an earlier run (resolved_marker)
    said: list[str] = []
    with pytest.raises(GantryError, match=r"requirements.txt:38: tensorflow-io-gcs-filesystem==0.26.0 .*Python 3.11"):
        project_resolve.check([line], PINS, said.append, python="3.11")
    project_resolve.check([line], PINS, said.append, python="3.10")
    assert said[-1] == "gantry: all 1 requirement(s) resolve to wheels for Python 3.10 on linux x86_64", said


# ---- 2. the CUDA image's torch carries exactly the CUDA infra requires -------------------------------------------

def requires_dist(wheel: dict, version: str) -> list[str]:
    """The wheel's Requires-Dist lines: its PEP 658 .metadata beside it, else PyPI's JSON API for the release."""
    answer = get(wheel["url"] + ".metadata")
    if answer is not None:
        return [line for line in answer[0].decode().splitlines() if line.startswith("Requires-Dist:")]
    answer = get(f"https://pypi.org/pypi/torch/{version}/json")
    assert answer is not None, f"neither {wheel['url']}.metadata nor PyPI's JSON API describes {wheel['filename']}"
    return json.loads(answer[0])["info"]["requires_dist"] or []


def test_the_cuda_images_torch_carries_exactly_the_cuda_infra_requires():
    """infra requires docker/torch.json's cuda of the node's driver (infra/locals.tf); the wheel the CUDA image
    installs must be built for exactly that CUDA, as its own metadata says (cuda-toolkit==X.Y.z, nvidia-*-cuX)."""
    index = torch_pins.index_for("cuda", PINS)
    requirement = torch_pins.requirement(PINS)
    found = wheels(index_files(index, "torch"), requirement, image=True)
    assert found, f"{index} has no linux/amd64 cp311 wheel of {requirement}"
    lines = requires_dist(found[0], PINS["torch"])
    cuda = torch_pins.cuda_of(lines)
    majors = {m for line in lines for m in re.findall(r"nvidia-[a-z0-9-]+-cu(\d+)\b", line)}
    print(f"{found[0]['filename']}: CUDA {cuda} (Requires-Dist), nvidia-* for CUDA {sorted(majors)}; "
          f"docker/torch.json: {PINS['cuda']}")
    assert cuda == PINS["cuda"], (f"{found[0]['filename']} from {index} is built for CUDA {cuda}, but "
                                  f"docker/torch.json (what the nodes' boot check requires) says {PINS['cuda']}")
    assert majors <= {PINS["cuda"].split(".")[0]}, majors
    assert "docker/torch.json" in (REPO / "infra" / "locals.tf").read_text()  # infra's required CUDA is that file's


# ---- 3. every Debian/Ubuntu package exists in the release it is installed from ------------------------------------

def debian_cases() -> list[tuple[str, str, str, str]]:
    """(who, archive, release, package): scripts/docker_base.sh's debootstrap --include, and any apt-get install in
    the Dockerfiles (from Debian's archive, in their base image's release)."""
    base = (REPO / "scripts" / "docker_base.sh").read_text()
    suite = re.search(r'suite="\$\{DEBIAN_SUITE:-([a-z]+)\}"', base).group(1)
    mirror = re.search(r'mirror="\$\{DEBIAN_MIRROR:-(\S+?)\}"', base).group(1).replace("http://", "https://")
    cases = [("scripts/docker_base.sh", mirror, suite, package)
             for package in re.search(r"--include=(\S+)", base).group(1).split(",")]
    for dockerfile in DOCKERFILES:
        text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
        release = re.search(r"ARG BASE_IMAGE=\S+-([a-z]+)$", text, flags=re.MULTILINE).group(1)
        for install in re.findall(r"apt-get install ([^&;|]+)", text):
            cases += [(f"docker/{dockerfile.name}", "https://deb.debian.org/debian", release, package)
                      for package in install.split() if not package.startswith("-")]
    from gantry.projects import (
        apt as project_apt,  # git and make, in every image `gantry build --project` writes
    )

    cases += [("packages/gantry/projects/apt.py", "https://deb.debian.org/debian", project_apt.RELEASE, package)
              for package in project_apt.ALWAYS]
    return cases


def test_project_apt_reads_the_real_index_it_names(tmp_path):
    """apt.txt's check (gantry/projects/apt.py) parses Debian's own Packages.xz: the packages every project image
    installs are in it, a virtual package counts, and a name that is no package is not."""
    from gantry.projects import apt as project_apt

    get(project_apt.INDEX_URL)  # a skip naming the host when the archive does not answer
    names = project_apt.index_names({"XDG_CACHE_HOME": str(tmp_path)})
    assert names is not None and set(project_apt.ALWAYS) <= names and "libgl1" in names
    assert "awk" in names  # Provides: of mawk
    assert "libgl1-mesa-glxx" not in names
    assert project_apt.INDEX_URL.startswith(f"https://deb.debian.org/debian/dists/{project_apt.RELEASE}/main/")


@functools.cache
def packages_index(archive: str, release: str, component: str) -> bytes:
    """An archive's Packages index (amd64) for a release's component, decompressed once per session."""
    answer = get(f"{archive}/dists/{release}/{component}/binary-amd64/Packages.xz")
    assert answer is not None, f"{archive} has no {release}/{component}: is {release} a release there?"
    return lzma.decompress(answer[0])


@functools.cache
def packages_in(archive: str, release: str, components: tuple[str, ...]) -> frozenset[str]:
    """The binary packages (amd64) an archive's release lists in those components."""
    return frozenset(name.decode() for component in components for name in
                     re.findall(rb"^Package: (\S+)$", packages_index(archive, release, component), flags=re.MULTILINE))


@pytest.mark.parametrize(("who", "archive", "release", "package"), debian_cases(),
                         ids=lambda v: v if isinstance(v, str) and "://" not in v else None)
def test_every_debian_package_exists_in_the_release_it_names(who, archive, release, package):
    assert package in packages_in(archive, release, ("main",)), (
        f"{who} installs {package}, which Debian {release} main (amd64) does not have")


UBUNTU = "https://archive.ubuntu.com/ubuntu"


def ubuntu_codename(version: str) -> str:
    """24.04 -> noble: Debian's distro-info-data (ubuntu.csv: version, codename, series) from the archive
    scripts/docker_base.sh uses, confirmed by Ubuntu's own Release file (its first lines name Version). Ubuntu's
    archive lists no dists/ folder to search."""
    archive, suite = debian_cases()[0][1:3]
    index = packages_index(archive, suite, "main").decode()
    deb_path = re.search(r"^Package: distro-info-data\n(?:.+\n)*?Filename: (\S+)", index, flags=re.MULTILINE).group(1)
    deb = get(f"{archive}/{deb_path}")[0]
    csv = None
    position = 8  # an ar archive: "!<arch>\n", then 60-byte headers (name 16, ..., size at 48:58), bodies 2-aligned
    while position < len(deb) and csv is None:
        header = deb[position:position + 60]
        size = int(header[48:58])
        if header[:16].decode().startswith("data.tar"):
            with tarfile.open(fileobj=io.BytesIO(deb[position + 60:position + 60 + size])) as tar:
                csv = tar.extractfile("./usr/share/distro-info/ubuntu.csv").read().decode()
        position += 60 + size + size % 2
    rows = [row.split(",") for row in csv.splitlines()[1:]]
    codename = next((row[2] for row in rows if row[0].split()[0] == version), None)
    assert codename, f"Debian's distro-info-data knows no Ubuntu {version}"
    release = get(f"{UBUNTU}/dists/{codename}/Release", byte_range="bytes=0-600")
    assert release and re.search(rf"^Version: {re.escape(version)}$", release[0].decode(errors="replace"), re.M), (
        f"{UBUNTU}/dists/{codename}/Release does not say Version: {version}")
    return codename


def startup_script_cases() -> list[tuple[str, str, str]]:
    """(node kind, Ubuntu version of its default boot image, function) for each function of the rendered startup
    script that installs packages; GPU-only functions are those main() calls under use_gpu."""
    variables = (REPO / "infra" / "variables.tf").read_text()

    def default(name: str) -> str:
        return re.search(rf'variable "{name}" \{{.*?\n  default\s*=\s*"([^"]+)"', variables, flags=re.DOTALL).group(1)

    version = {kind: re.search(r"ubuntu-(\d\d)(\d\d)", default(var)).expand(r"\1.\2")
               for kind, var in (("cpu", "cpu_image"), ("gpu", "gpu_image_family"))}
    return [("cpu", version["cpu"]), ("gpu", version["gpu"])]


@pytest.fixture(scope="session")
def startup_script(tmp_path_factory):
    """The GPU node's startup script as Terraform renders it (it holds every function; main() picks)."""
    infra_tools = _load("infra_tools_for_index", REPO / "tests" / "infra" / "infra_tools.py")
    infra_tools.require_tool("terraform", "install Terraform >= 1.9 (CI machines have 1.11)")
    return infra_tools.render_startup_script(tmp_path_factory.mktemp("render"), use_gpu=True)


def apt_installs(script: str, kind: str) -> list[tuple[str, str | None]]:
    """(package, the third-party apt source list URL it comes from, or None for the distribution's archive) for
    every apt_install the node kind's boot runs."""
    functions = dict(re.findall(r"^(\w+)\(\) \{\n(.*?)^\}$", script, flags=re.MULTILINE | re.DOTALL))
    main = functions["main"]
    gpu_block = re.search(r'if \[ "\$use_gpu" = "true" \]; then\n(.*?)\n\s*fi', main, flags=re.DOTALL).group(1)
    gpu_only = set(re.findall(r"^\s*(\w+)\s*$", gpu_block, flags=re.MULTILINE))
    called = set(re.findall(r"^\s*(\w+)\s*$", main, flags=re.MULTILINE))
    found = []
    for name in sorted(called if kind == "gpu" else called - gpu_only):
        body = functions.get(name, "")
        source = re.search(r"(https://\S+\.list)", body) if "sources.list.d" in body else None
        for line in re.findall(r"^\s*apt_install (.+)$", body, flags=re.MULTILINE):
            found += [(package, source.group(1) if source else None) for package in line.split()]
    return found


@pytest.mark.parametrize(("kind", "version"), startup_script_cases(), ids=lambda v: v if len(v) == 3 else None)
def test_every_package_the_startup_script_installs_exists_in_the_nodes_ubuntu(startup_script, kind, version):
    installs = apt_installs(startup_script, kind)
    assert installs, f"no apt_install found in the {kind} node's boot: the parser no longer reads the script"
    ubuntu = [package for package, source in installs if source is None]
    codename = ubuntu_codename(version)
    archive = packages_in(UBUNTU, codename, ("main", "universe"))
    missing = [p for p in ubuntu if p not in archive]
    assert not missing, f"Ubuntu {version} ({codename}) main/universe has no {missing}: the {kind} node's boot fails"


def test_every_package_the_startup_script_takes_from_a_vendor_repository_is_there(startup_script):
    third_party = [(package, source) for package, source in apt_installs(startup_script, "gpu") if source]
    assert third_party, "the GPU boot adds NVIDIA's repository for nvidia-container-toolkit: the parser missed it"
    for package, source in third_party:
        answer = get(source)  # NVIDIA's list names its repository: deb https://... /
        assert answer is not None, f"{source} is gone: a GPU node cannot add {package}'s repository"
        repo = re.search(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+/", answer[0].decode(), flags=re.MULTILINE).group(1)
        listing = get(repo.replace("$(ARCH)", "amd64").rstrip("/") + "/Packages")
        assert listing is not None and re.search(rf"^Package: {re.escape(package)}$", listing[0].decode(), re.M), (
            f"{repo} lists no {package}")
