"""What a build of your own project folder sends to the engine: its files minus what its .dockerignore and .gitignore
leave out (docker's and git's own semantics), and never .git, a virtual environment (a folder holding pyvenv.cfg or
conda-meta) or __pycache__. What was left out, and which file and line said so, is reported before anything is
sent, and a context over the size limit is refused naming its largest folders.

.devcontainer (gantry devcontainer's) stays out too: writing it must not change the image's version. A .dockerignore
exception (``!data/labels.csv``) takes back a file the .gitignore leaves out: the .dockerignore is
the build's own word. Nested .gitignore files count for their folder, as in git.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from gantry.errors import GantryError

DEFAULT_MAX_CONTEXT_MB = 500
MB = 1_000_000
VENV_MARKERS = ("pyvenv.cfg", "conda-meta")
# Leave-outs no project wants in an image, whatever its ignore files say. .devcontainer is `gantry devcontainer`'s:
# writing it must not change the image's version.
ALWAYS_LEFT_OUT = (".git", "__pycache__", ".devcontainer")


@dataclass
class LeftOut:
    path: str  # relative, with a trailing / for a folder
    size: int
    reason: str  # ".gitignore:3", "a virtual environment", "" (.git, __pycache__: always)
    count: int = 1


@dataclass
class Context:
    project: Path
    files: list[Path] = field(default_factory=list)  # absolute, sorted
    size: int = 0
    left_out: list[LeftOut] = field(default_factory=list)

    def summary(self) -> list[str]:
        """One or two lines: size, file count, then what was left out, the biggest first."""
        lines = [f"gantry: context of {self.project}: {len(self.files)} files, {human(self.size)}"]
        if self.left_out:
            shown = sorted(self.left_out, key=lambda item: -item.size)
            parts = [f"{item.path} {human(item.size)}" + (f" x{item.count}" if item.count > 1 else "")
                     + (f" ({item.reason})" if item.reason else "") for item in shown[:6]]
            more = f", and {len(shown) - 6} more" if len(shown) > 6 else ""
            lines.append(f"gantry: left out: {', '.join(parts)}{more}")
        return lines

    def largest_folders(self, n: int = 3) -> list[tuple[str, int]]:
        """The top-level folders (or files) of the context that weigh most."""
        sizes: dict[str, int] = {}
        for path in self.files:
            parts = path.relative_to(self.project).parts
            top = parts[0] + ("/" if len(parts) > 1 else "")
            sizes[top] = sizes.get(top, 0) + _size(path)
        return sorted(sizes.items(), key=lambda item: -item[1])[:n]

    def check_size(self, max_mb: float) -> None:
        if self.size <= max_mb * MB:
            return
        biggest = ", ".join(f"{name} {human(size)}" for name, size in self.largest_folders())
        raise GantryError(f"the build context of {self.project} is {human(self.size)}, over the {max_mb:g} MB limit "
                          f"(largest: {biggest}); nothing was sent",
                          "Add what the image does not need to the project's .dockerignore (or .gitignore), or "
                          "raise --max-context-mb")


def human(size: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} B"


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _tree_size(folder: Path) -> tuple[int, int]:
    total = count = 0
    for base, _, names in os.walk(folder):
        for name in names:
            total += _size(Path(base, name))
            count += 1
    return total, count


class _DockerIgnore:
    """The project's .dockerignore with docker's own matching (docker.utils.build, what the engine's CLI does):
    the last pattern that matches a path decides; each keeps its line number for the report."""

    def __init__(self, project: Path):
        from docker.utils.build import Pattern

        self.patterns = []  # (line number, Pattern)
        path = project / ".dockerignore"
        lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                pattern = Pattern(text)
                if pattern.dirs:
                    self.patterns.append((number, pattern))

    def rule(self, rel: str) -> tuple[bool, int] | None:
        """(excluded, line) of the pattern that decides ``rel``, or None when none matches."""
        parent = os.path.dirname(rel)
        parent_dirs = parent.split("/") if parent else []
        decided = None
        for number, pattern in self.patterns:
            match = pattern.match(rel)
            if not match and parent and len(pattern.dirs) <= len(parent_dirs):
                match = pattern.match("/".join(parent_dirs[:len(pattern.dirs)]))
            if match:
                decided = (not pattern.exclusion, number)
        return decided

    def may_take_back(self, rel_dir: str) -> bool:
        """Whether an exception pattern could take back something inside ``rel_dir`` (docker walks in then)."""
        return any(p.exclusion and p.cleaned_pattern.startswith(rel_dir + "/") for _, p in self.patterns)


class _GitIgnores:
    """Every .gitignore of the tree (pathspec's GitIgnoreSpec: git's semantics), each for its own folder."""

    def __init__(self):
        self.specs = []  # (folder relative, spec, line numbers, label)

    def add(self, project: Path, rel_dir: str) -> None:
        import pathspec

        path = project / rel_dir / ".gitignore"
        if not path.is_file():
            return
        numbers, lines = [], []
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if line.strip() and not line.startswith("#"):
                numbers.append(number)
                lines.append(line)
        label = f"{rel_dir}/.gitignore" if rel_dir else ".gitignore"
        self.specs.append((rel_dir, pathspec.GitIgnoreSpec.from_lines(lines), numbers, label))

    def rule(self, rel: str, is_dir: bool) -> str | None:
        """'.gitignore:N' of the rule that ignores ``rel``; None when kept. Deeper files decide last."""
        decided = None
        for base, spec, numbers, label in self.specs:
            if base and not rel.startswith(base + "/"):
                continue
            inner = rel[len(base) + 1:] if base else rel
            result = spec.check_file(inner + ("/" if is_dir else ""))
            if result.include is not None:
                decided = f"{label}:{numbers[result.index]}" if result.include else None
        return decided


def select(project: Path) -> Context:
    """Walk ``project``: the files a build sends, and what was left out and why."""
    project = project.resolve()
    context = Context(project)
    docker_ignore = _DockerIgnore(project)
    git_ignores = _GitIgnores()
    caches: list[int] = [0, 0]  # __pycache__: size, folders

    def reason_for(rel: str, is_dir: bool) -> str | None:
        docker_rule = docker_ignore.rule(rel)
        if docker_rule and not docker_rule[0]:
            return None  # an exception of the .dockerignore takes it back
        if docker_rule:
            return f".dockerignore:{docker_rule[1]}"
        return git_ignores.rule(rel, is_dir)

    def leave_out(rel: str, size: int, reason: str, count: int = 1) -> None:
        context.left_out.append(LeftOut(rel, size, reason, count))

    for base, dirs, names in os.walk(project):
        rel_base = Path(base).relative_to(project).as_posix()
        rel_base = "" if rel_base == "." else rel_base
        git_ignores.add(project, rel_base)
        kept_dirs = []
        for name in sorted(dirs):
            rel = f"{rel_base}/{name}" if rel_base else name
            folder = Path(base, name)
            if name in ALWAYS_LEFT_OUT:
                size, _ = _tree_size(folder)
                if name == "__pycache__":
                    caches[0] += size
                    caches[1] += 1
                else:
                    leave_out(rel + "/", size, "")
                continue
            if any((folder / marker).exists() for marker in VENV_MARKERS):
                leave_out(rel + "/", _tree_size(folder)[0], "a virtual environment")
                continue
            reason = reason_for(rel, True)
            if reason and not docker_ignore.may_take_back(rel):
                size, count = _tree_size(folder)
                leave_out(rel + "/", size, reason)
                continue
            kept_dirs.append(name)
        dirs[:] = kept_dirs
        for name in sorted(names):
            rel = f"{rel_base}/{name}" if rel_base else name
            path = Path(base, name)
            reason = reason_for(rel, False)
            if reason:
                leave_out(rel, _size(path), reason)
                continue
            context.files.append(path)
            context.size += _size(path)
    if caches[1]:
        leave_out("__pycache__/", caches[0], "", caches[1])
    context.files.sort()
    _group_files(context)
    return context


def _group_files(context: Context) -> None:
    """Single files left out by one rule become one entry (``*.pt`` x12), so the report stays a line."""
    grouped: dict[str, LeftOut] = {}
    kept = []
    for item in context.left_out:
        if item.path.endswith("/") or not item.reason:
            kept.append(item)
            continue
        if item.reason in grouped:
            entry = grouped[item.reason]
            entry.size += item.size
            entry.count += 1
            entry.path = "files"
        else:
            grouped[item.reason] = LeftOut(item.path, item.size, item.reason)
    context.left_out = kept + list(grouped.values())


def context_files(project: Path) -> list[Path]:
    """The files a build of ``project`` sends (gantry.projects hashes them into the image's version)."""
    return select(project).files


def no_such_folder(project: Path) -> GantryError:
    return GantryError(f"no project folder {project}", "Pass --project the folder that holds your code "
                       "(with a Dockerfile, a pyproject.toml or a requirements.txt)")
