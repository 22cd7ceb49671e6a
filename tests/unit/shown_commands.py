"""Every command a user is shown, read from where they are shown: `make help`'s output, the `gantry` and `selfplay`
verbs, and README.md and docs/*.md (each code block's command lines, and the inline `make ...`, `gantry ...` and
`python -m selfplay ...` of their prose). tests/unit/test_shown_commands.py runs them or names the test that does.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from suite_make import ROOT, clean_environ

# Every Markdown file a user is pointed to: the README, docs/, each example's README and the benchmark records.
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").glob("*/README.md")),
        *sorted((ROOT / "bench").glob("*.md"))]
# The programs a code block's line may start with; a shell block's line starting with another fails the layer, so
# a new kind of command brings a rule with it. An untagged block (a diagram, a file list) counts only these lines.
PROGRAMS = ("make", "gantry", ".venv/bin/gantry", "python", "python3", "selfplay", "gcloud", "terraform", "docker",
            "devcontainer", "npm", "cp", "sudo", "eval", "$EDITOR", "pip")
# a command names a target or a verb; "gantry run: error: ..." (a message quoted in prose) is not one
INLINE = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:make|gantry|\.venv/bin/gantry|python3?|selfplay|docker|terraform|gcloud|pip"
                    r"|scripts/\S+) (?!\S+: )\S")
SHELL_BLOCKS = ("bash", "sh", "shell", "console")


@dataclass(frozen=True)
class Shown:
    source: str  # "make help", "verbs", or the doc's path relative to the repository
    command: str  # the words, shell-quoted again: one spelling however the doc spaced or continued it

    @property
    def words(self) -> list[str]:
        return shlex.split(self.command)

    @property
    def program(self) -> str:
        """The first word that is not an environment assignment: make, gantry, gcloud, ..."""
        return next(w for w in self.words if not re.match(r"^[A-Z_]+=", w))


def make_help_commands() -> list[Shown]:
    out = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT), "help"], capture_output=True, text=True,
                         timeout=60, check=True, env=clean_environ()).stdout
    return [Shown("make help", f"make {t}") for t in re.findall(r"^  make (\S+)", out, flags=re.M)]


def verb_commands() -> list[Shown]:
    from gantry.cli import VERBS as GANTRY_VERBS
    from selfplay.cli import VERBS as SELFPLAY_VERBS

    return ([Shown("verbs", f"gantry {v.NAME}") for v in GANTRY_VERBS]
            + [Shown("verbs", f"python -m selfplay {v.NAME}") for v in SELFPLAY_VERBS])


def _command(line: str) -> str | None:
    try:
        words = shlex.split(line, comments=True)
    except ValueError:  # an unbalanced quote in prose
        return None
    return shlex.join(words) if words else None


def doc_commands(path: Path) -> list[Shown]:
    source = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    text = path.read_text()
    shown = []
    fence = r"^[ \t]*```"  # a block may be indented under a list item
    for language, body in re.findall(fence + r"(\w*)\n(.*?)" + fence, text, flags=re.S | re.M):
        for line in body.replace("\\\n", " ").splitlines():
            command = _command(line)
            if command is None:
                continue
            first = Shown(source, command).program
            if first in PROGRAMS or language in SHELL_BLOCKS:
                shown.append(Shown(source, command))
    prose = re.sub(fence + r".*?" + fence, "", text, flags=re.S | re.M)
    for wrapped in re.findall(r"`([^`]+)`", prose):
        span = re.sub(r"\s*\n\s*", " ", wrapped)  # a command the paragraph wrapped onto its next line
        if INLINE.match(span) and (command := _command(span)) is not None:
            shown.append(Shown(source, command))
    return shown


def all_shown() -> list[Shown]:
    """Each command once per source, in the order shown."""
    found = [*make_help_commands(), *verb_commands(), *(c for path in DOCS for c in doc_commands(path))]
    return list(dict.fromkeys(found))


# ---- what runs each: a rule per command pattern ---------------------------------------------------------------------

@dataclass(frozen=True)
class Here:
    """test_shown_commands.py runs it with the smallest real input: `test` names the test function."""

    test: str


@dataclass(frozen=True)
class Proven:
    """Another test runs it through the command line (or, for Google's own commands, runs what they set up)."""

    node: str  # tests/PATH.py::test_function

    def exists(self) -> bool:
        path, _, function = self.node.partition("::")
        file = ROOT / path
        if not file.is_file():
            return False
        tree = ast.parse(file.read_text())
        return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function
                   for n in ast.walk(tree))


@dataclass(frozen=True)
class Costly:
    """Too costly for CI (a 5 GB CUDA build, a GPU): `script` runs it where it can, for `reason`. Keep this list short:
    every command here is one CI does not prove."""

    reason: str
    script: str


LOCAL = Here("test_the_local_journey_runs_through_make")
MAKE_HELP = Here("test_make_help_and_help_all")
VERB_HELP = Here("test_every_verb_answers_help_through_its_command_line")
CHECK = Here("test_selfplay_check_accepts_the_default_config")
SUITE = Here("test_make_test_fast_and_test_and_lint_run_on_one_file")
DRY = Here("test_make_accepts_every_shown_make_command")  # make -n, then the verb's own parser takes the flags

LAUNCHER = "tests/launcher"
DEVCONTAINER_RUN = Proven(f"{LAUNCHER}/test_project_build.py::"
                          "test_devcontainer_writes_the_project_image_and_keeps_an_existing_file")
TWIN = Proven("tests/launcher/test_node_twin.py::test_the_cloud_journey_end_to_end")
# make local-cloud, apply, the README's own-project block with make preempt in it, destroy, make local-cloud-down
LOCAL_CLOUD = Proven("tests/launcher/test_local_cloud.py::"
                     "test_a_user_rehearses_their_own_project_on_the_local_cloud_through_make")
# gantry run-local on the example project's image, its checkpoints checked for the user's uid
RUN_LOCAL = Proven("tests/docker/test_project_image.py::"
                   "test_a_requirements_project_builds_on_the_kit_torch_and_a_code_edit_rebuilds_only_the_code")
DEVCONTAINER = Proven("tests/docker/test_devcontainer.py::test_dev_container_comes_up_and_runs_the_fast_suite")
CPU_IMAGE = Proven("tests/docker/test_cpu_image.py::test_single_container_trains_checkpoints_and_stops_cleanly")
TWO_CONTAINERS = Proven("tests/docker/test_cpu_image.py::test_two_containers_rendezvous_over_gloo_train_and_stop")
DISTRIBUTED = Proven("tests/integration/test_distributed.py::test_two_nodes_train_in_step_and_rank0_checkpoint_resumes")
STANDIN = Proven("tests/infra/test_standin_plan.py::test_root_module_terraform_test_suite_passes")
DELETE_DATA = Proven(f"{LAUNCHER}/test_launcher_destroy.py::test_delete_data_empties_the_bucket_first")

# (pattern over Shown.command, what runs it): the first that matches counts. Every rule must match some command.
RULES: list[tuple[str, Here | Proven | Costly]] = [
    # a ladder over every checkpoint (bench/RESULTS.md): a run with two or more, laddered through selfplay arena
    (r"^make arena RUN_DIR=\S+ 'ARGS=--every-checkpoint ", Proven(
        "tests/integration/test_arena_cli.py::test_arena_on_a_freshly_trained_run_prints_the_ladder_and_writes_the_record")),
    # make help's local targets and the README's local block: a tiny Connect Four run, then its grades
    (r"^make (train-local|eval|arena|plot|tensorboard)( '?(CONFIG|RUN_DIR|ARGS)=.*)?$", LOCAL),
    (r"^make (train-local|install-dev) TORCH_SPEC=", Proven("tests/unit/test_make_venv.py::"  # and the install itself:
                                              "test_a_torch_spec_other_than_the_venvs_installs_torch_again")),
    # tests/docker/test_torch_pins.py::test_torch_spec_is_the_users_choice_installed_as_given
    (r"^make (help|help-all)$", MAKE_HELP),
    (r"^make (test|test-fast|lint)( ARGS=.*)?$", SUITE),
    # make's plan of a new .venv; the torch step itself: tests/docker/test_torch_pins.py
    (r"^make install$", Proven("tests/unit/test_make_venv.py::test_a_new_venv_installs_torch_then_the_trainer")),
    (r"^make install-dev$", DEVCONTAINER),  # its postCreateCommand
    (r"^make clean$", Here("test_make_clean_removes_the_caches_and_keeps_the_rest")),
    (r"^make bench( .*)?$", Proven("tests/integration/test_bench.py::test_quick_bench_writes_throughput_json")),
    (r"^make compare( .*)?$", Proven("tests/unit/test_bench_compare.py::test_make_compare_prints_what_the_module_does")),
    # Google's: against the stand-ins (tests/launcher: the real CLI, fake Compute and Google APIs) or the node twin,
    # which runs the README's two cloud blocks as they stand (node_twin.readme_walkthrough)
    (r"^make cost$", Proven(f"{LAUNCHER}/test_launcher_cli.py::test_cost_needs_no_cloud")),
    (r"^make cost ARGS=--trc$", Proven(f"{LAUNCHER}/test_launcher_cli.py::"
                                        "test_cost_trc_calls_a_tpu_free_through_the_command_line_and_still_shows_its_list_price")),
    (r"^make preflight$", Proven(f"{LAUNCHER}/test_launcher_cli.py::"
                                 "test_make_shows_gantrys_status_and_the_console_script_returns_it")),
    (r"^make apply$", Proven(f"{LAUNCHER}/test_launcher_apply.py::"
                             "test_apply_says_what_it_creates_and_bills_then_asks_at_a_terminal")),
    (r"^make apply ARGS=-y$", Proven(f"{LAUNCHER}/test_launcher_apply.py::test_apply_y_does_not_ask")),
    (r"^make (build-train|push-train)( ARGS=--no-push| BASE_IMAGE=gantry-base:bookworm)?$", TWIN),
    (r"^make build-train PROJECT=", LOCAL_CLOUD),
    (r"^make (local-cloud( NODES=\d+)?|local-cloud-down|preempt NODE=\d+|fault FAULT=(stockout|quota|none))$",
     LOCAL_CLOUD),
    (r"^make (preempt|fault)$", Proven(f"{LAUNCHER}/test_local_cloud.py::"
                                       "test_preempt_or_fault_without_a_local_cloud_or_a_node_says_what_to_type")),
    (r"^make run-local( .*)?$", RUN_LOCAL),  # the README's own-project block; PROJECT=DIR in prose
    (r"^make build-train GPU=1$", Proven("tests/docker/test_cpu_image.py::"
                                         "test_cuda_dockerfile_builds_to_torch_and_refuses_a_cpu_torch")),
    (r"^make build-train BASE_IMAGE=python:", Proven("tests/docker/test_cpu_image.py::"  # the cpu_image fixture's base
                                                     "test_cpu_image_holds_cpu_torch_and_the_trainer_only")),
    (r"^make run-gcp$", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                               "test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys")),
    (r"^make run-gcp 'ARGS=--detach -- --config tictactoe ", Proven(
        f"{LAUNCHER}/test_launcher_runs.py::test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys")),
    ((r"^make run-gcp 'ARGS=(--image \S+ |--sync out --stats out/stats\.jsonl )?-- -m |"
     r"^make run-gcp 'ARGS=\[--image IMAGE\] -- -m "), Proven(
        f"{LAUNCHER}/test_launcher_runs.py::test_run_starts_your_own_torchrun_program_with_the_same_rendezvous_and_run_dir")),
    (r"^make run-gcp 'ARGS=--image \S+'$", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                                  "test_run_refuses_an_image_the_registry_does_not_hold_before_touching_a_node")),
    (r"^make run-gcp ARGS=--replace$", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                              "test_a_second_run_does_not_silently_replace_the_one_in_progress")),
    (r"^make run-gcp 'ARGS=--resume RUN_ID'$", TWIN),
    (r"^make run-gcp 'ARGS=-- --search.simulations=\d+'$", Proven(
        f"{LAUNCHER}/test_launcher_runs.py::test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys")),
    (r"^make run-gcp 'ARGS=--max-minutes 0'$", Proven(f"{LAUNCHER}/test_launcher_commands.py::"
                                                      "test_a_command_run_writes_command_sync_stats_and_every_address_into_each_nodes_spec")),
    (r"^make run-gcp PROJECT=DIR 'ARGS=--ray -- ", LOCAL_CLOUD),
    (r"^make run-gcp PROJECT=", Proven(f"{LAUNCHER}/test_launcher_commands.py::"
                                       "test_a_command_run_writes_command_sync_stats_and_every_address_into_each_nodes_spec")),
    (r"^make status$", Proven(f"{LAUNCHER}/test_launcher_runs.py::test_status_shows_each_node_and_the_kit_trainers_figures_and_pons_errors_as_its_gantry_yaml_names_them")),
    (r"^make logs( ARGS=--follow)?$", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                             "test_logs_reads_the_masters_serial_port_and_follows_from_offsets")),
    (r"^make stop( ARGS=-y)?$", Proven(f"{LAUNCHER}/test_launcher_runs.py::test_stop_sets_action_stop_on_every_started_node")),
    (r"^make stop 'ARGS=-y --power-off'$", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                                  "test_stop_power_off_stops_every_vm_once_the_run_stopped")),
    (r"^make fetch$", DRY),  # without RUN= its recipe refuses in one line, which the dry-run test runs
    (r"^make fetch '?RUN=", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                   "test_fetch_copies_the_whole_run_but_not_partial_uploads_and_then_only_what_changed")),
    (r"^make destroy$", Proven(f"{LAUNCHER}/test_launcher_destroy.py::test_asks_before_destroying")),
    (r"^make destroy ARGS=-y$", Proven(f"{LAUNCHER}/test_launcher_destroy.py::test_clean_teardown_proves_nothing_is_left")),
    (r"^make destroy 'ARGS=-y --delete-data'$", DELETE_DATA),
    (r"^make train-docker( .*)?$", Proven("tests/docker/test_cpu_image.py::"
                                          "test_make_train_docker_trains_in_the_cpu_image_into_its_own_run_folder")),
    (r"^make docker-base$", Proven("tests/docker/test_cpu_image.py::"
                                   "test_the_local_base_holds_the_shared_libpython_that_torch_xla_links_against")),
    (r"^make devcontainer( .*)?$", DEVCONTAINER_RUN),
    (r"^make test-cuda-image$", Costly("builds the 5.4 GB CUDA image (269 s and 5 GB of CI's disk); its checks, "
                                       "tests/docker/test_cuda_image.py, skip where the image is absent",
                                       "make test-cuda-image, and scripts/gpu_check.py on a GPU machine")),
    # the maintainers' targets the docs name
    (r"^make (infra-check|infra-checkov-venv|infra-render)$", Proven("tests/infra/test_infra_static.py::"
                                                                     "test_provider_free_module_tests_pass")),
    (r"^make (standin-schema|standin-schema-check)$", Proven("tests/infra/test_standin_schema.py::"
                                                             "test_extractor_reproduces_the_committed_schema_byte_for_byte")),
    (r"^make (standin-plan|test-standin)( .*)?$|^eval .*standin-env", STANDIN),
    (r"^(\S+=\S+ )*make (xla-venv|test-xla)$", Proven("tests/integration/test_xla.py::"
                                                    "test_the_xla_learner_trains_tictactoe_serving_the_actors_leaves_then_resumes")),
    # the verbs
    (r"^(\.venv/bin/)?gantry( [a-zA-Z]+)?( --help)?$", VERB_HELP),
    (r"^python -m selfplay ([a-z]+|VERB ...)$", VERB_HELP),  # VERB: each of them
    (r"^python -m selfplay check", CHECK),
    (r"^(\S+=\S+ )*python -m selfplay launch", DISTRIBUTED),
    (r"^selfplay [a-z/]+( --config| --help)?$", VERB_HELP),
    # the benchmark records' grading and audit commands (bench/*.md): each flag one eval's parser has; the verb's real
    # run is make eval's (VERB_RUNS)
    (r"^(python -m )?selfplay eval --", Here("test_every_flag_of_a_shown_selfplay_eval_is_one_eval_takes")),
    (r"^selfplay eval --precision int8$", Proven("tests/integration/test_train_cli.py::"
                                                 "test_connect4_training_evaluates_periodically_and_eval_cli_grades_the_checkpoint")),
    (r"^gantry build --ca-cert", Proven("tests/docker/test_images.py::test_missing_certificate_is_named")),
    (r"^(\.venv/bin/)?gantry (preflight|destroy -y)$", Proven("tests/launcher/test_launcher_cli.py::"
                                                               "test_make_shows_gantrys_status_and_the_console_script_returns_it")),
    (r"^gantry (run|status|stop|fetch|logs|build|push)\b", TWIN),
    # Google's own CLI (no stand-in runs gcloud): the test of what the command sets up or reads, as gantry meets it
    (r"^gcloud (auth|config set project)", Proven(f"{LAUNCHER}/test_launcher_preflight.py::"
                                                  "test_no_credentials_says_how_to_log_in")),
    (r"^gcloud services enable( |$)", Proven("tests/unit/test_readme.py::test_walkthrough_enables_every_api_infra_needs")),
    (r"^gcloud compute (project-info|regions) describe ", Proven(f"{LAUNCHER}/test_launcher_preflight.py::"
                                                                  "test_gpu_quota_zero_names_the_shortfall_and_how_to_raise_it")),
    (r"^gcloud compute instances get-guest-attributes ", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                                                "test_status_shows_each_node_and_the_kit_trainers_figures_and_pons_errors_as_its_gantry_yaml_names_them")),
    (r"^gcloud compute instances get-serial-port-output ", Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                                                                  "test_logs_reads_the_masters_serial_port_and_follows_from_offsets")),
    (r"^gcloud compute ssh .*--tunnel-through-iap", STANDIN),  # infra/tests/plan_cpu.tftest.hcl: the IAP rule
    # Terraform and the user's shell
    (r"^cp infra/terraform.tfvars.example infra/terraform.tfvars$", Proven(f"{LAUNCHER}/test_launcher_config.py::"
                                                                          "test_reads_the_infra_example_that_users_copy")),
    (r"^'\$EDITOR' infra/terraform.tfvars$", Proven(f"{LAUNCHER}/test_launcher_config.py::"
                                                    "test_uncommenting_a_block_of_the_infra_example_is_the_whole_change")),
    (r"^terraform -chdir=infra output$", TWIN),  # the twin's deployment is apply's outputs
    (r"^terraform -chdir=infra destroy$", Proven(f"{LAUNCHER}/test_launcher_destroy.py::"
                                                 "test_clean_teardown_proves_nothing_is_left")),
    # a proxy's CA: the host's trust store (the user's sudo, which the context's certificates follow), or docker/certs
    # and a plain docker build of the Dockerfile, as the kit's CPU image is built with this machine's extra CAs
    (r"^sudo cp corp-root\.crt ", Proven("tests/docker/test_images.py::"
                                         "test_context_is_the_repo_minus_dockerignore_plus_wheels_and_certificates")),
    (r"^cp '~/corp-root\.crt' docker/certs/ '&&' docker build ", Proven(
        "tests/docker/test_cpu_image.py::test_cpu_image_holds_cpu_torch_and_the_trainer_only")),
    (r"^docker build( |$)", Proven("tests/docker/test_cpu_image.py::test_cpu_image_holds_cpu_torch_and_the_trainer_only")),
    (r"^docker run --rm ", CPU_IMAGE),
    (r"^docker run -d ", TWO_CONTAINERS),
    (r"docker compose ", Proven("tests/docker/test_dockerfiles.py::test_compose_file_is_valid_for_docker_compose")),
    (r"^(npm install -g @devcontainers/cli|devcontainer )", DEVCONTAINER),
    # ---- the prose's tools: what gantry, the agent and the images run, named where the docs explain them
    # the agent on a node (the real engine and agent in the node twin): login, pull, run, attach, logs, cp, stop
    ((r"^docker (attach|logs|cp|pull|login|image inspect)\b|^docker run( \.\.\.| --entrypoint|$)|^docker stop -t (15|25)$"
     r"|^python3 -m gantry_agent$"), TWIN),
    (r"^docker stop( -t 60)?$", CPU_IMAGE),  # docs/DOCKER.md: the trainer's checkpoint on docker stop
    (r"^docker import$", Proven("tests/docker/test_cpu_image.py::"  # make docker-base imports its tree
                                "test_the_local_base_holds_the_shared_libpython_that_torch_xla_links_against")),
    (r"^pip (install \.|list)$", Proven("tests/docker/test_cpu_image.py::"  # the image's own install; a program on PATH
                                        "test_cpu_image_holds_cpu_torch_and_the_trainer_only")),
    (r"^pip download --no-deps torch==", Costly("asks download.pytorch.org, which CI cannot reach (the wheel folder it "
                                                "makes is built from in every image build here: images.default_wheel_dir)",
                                                "by hand, behind a proxy that blocks download.pytorch.org")),
    (r"^python (train\.py|SCRIPT)$", Proven(f"{LAUNCHER}/test_launcher_commands.py::"
                                            "test_a_command_run_writes_command_sync_stats_and_every_address_into_each_nodes_spec")),
    # gantry's own Terraform calls (the real binary on a provider-free module), its refusals and the stand-in's
    (r"^terraform (init|apply|destroy|output( zone)?|plan -json|show -json)$", Proven(
        f"{LAUNCHER}/test_launcher_terraform.py::test_init_plan_apply_output_destroy")),
    (r"^terraform (not found|version)$", Proven(f"{LAUNCHER}/test_launcher_cli.py::"
                                                "test_without_terraform_a_verb_says_terraform_not_found_and_how_to_install_it")),
    (r"^terraform -chdir=infra init -migrate-state$", Proven(
        f"{LAUNCHER}/test_launcher_terraform.py::test_a_changed_backend_after_the_first_apply_is_refused_not_forgotten")),
    (r"^terraform (validate|test)$", STANDIN),
    (r"^terraform providers schema -json$", Proven("tests/infra/test_standin_schema.py::"
                                                   "test_extractor_reproduces_the_committed_schema_byte_for_byte")),
    (r"^terraform fmt -check -recursive infra$", Proven("tests/infra/test_infra_static.py::test_terraform_fmt_is_clean")),
    (r"^terraform -chdir=infra providers lock ", Costly("asks registry.terraform.io, which CI cannot reach (the google "
                                                        "provider is not downloadable here)",
                                                        "by hand, when infra/terraform.tf's google provider pin changes")),
    (r"^terraform -chdir=infra apply$", DELETE_DATA),
    # Google's commands the launcher prints or the docs point to, as the tests meet what they set up or name
    (r"^gcloud compute images list ", Proven(f"{LAUNCHER}/test_launcher_preflight.py::"
                                             "test_a_retired_gpu_image_family_is_a_blocker_that_lists_the_live_ones")),
    (r"^gcloud storage rm --recursive ", DELETE_DATA),
    (r"^gcloud compute instances list --filter=labels\.gantry-deployment=", Proven(
        f"{LAUNCHER}/test_launcher_destroy.py::test_clean_teardown_proves_nothing_is_left")),
    (r"^gcloud ('…'|\.\.\.) delete$", Proven(f"{LAUNCHER}/test_launcher_destroy.py::"
                                              "test_everything_a_failed_destroy_left_is_named_with_its_delete_command")),
    (r"^gcloud compute tpus tpu-vm delete$", Proven(f"{LAUNCHER}/test_launcher_destroy.py::"
                                                    "test_leftover_tpu_node_and_queued_resource_are_named_with_their_delete_commands")),
    (r"^gcloud quotas( preferences create)?$", Proven(f"{LAUNCHER}/test_launcher_preflight.py::"
                                                     "test_gpu_quota_zero_names_the_shortfall_and_how_to_raise_it")),
    (r"^gcloud compute instances describe$", Proven("tests/infra/test_infra_agent_bundle.py::"
                                                    "test_terraform_ships_the_files_shipped_files_builds")),
    # the maintainers' scripts and benchmarks
    (r"^python3 scripts/test_areas\.py$", Here("test_test_areas_sums_a_junit_report_by_area")),
    (r"^python3 scripts/gpu_check\.py$", Costly("needs an NVIDIA GPU, which CI does not have (make test rehearses its "
                                                 "train and resume checks on CPUs: tests/unit/test_gpu_check.py)",
                                                 "scripts/gpu_check.py on a GPU machine")),
    (r"^python -m bench\.compare ", Proven("tests/unit/test_bench_compare.py::"
                                           "test_make_compare_prints_what_the_module_does")),
    (r"^python -m bench\.preemption( |$)", Proven("tests/unit/test_bench_refusals.py::"
                                                  "test_a_missing_checkpoint_is_refused_in_one_line")),
    (r"^scripts/xla_venv\.sh --path$|^pip install$", Proven(
        "tests/integration/test_xla.py::test_the_xla_learner_trains_tictactoe_serving_the_actors_leaves_then_resumes")),
    # an example's own README: its local run, in the project's image (what a machine with its requirements is)
    (r"^pip install -r requirements\.txt$|^python scripts/train_multi_gpu\.py ", RUN_LOCAL),
]


def proofs() -> dict[str, str]:
    """Each test named as a shown command's proof (tests/PATH.py::test_name) -> the commands it proves, for the verdict
    at the end of the whole suite (tests/shown_proof.py): that test must have run and passed."""
    proved: dict[str, list[str]] = {}
    checks = [(f"{s.command} ({s.source})", rule[1]) for s in all_shown() if (rule := rule_of(s)) is not None]
    checks += [(f"{verb} (its real run)", check) for verb, check in VERB_RUNS.items()]
    for what, check in checks:
        node = {Here: lambda c: f"tests/unit/test_shown_commands.py::{c.test}",
                Proven: lambda c: c.node}.get(type(check), lambda c: None)(check)
        if node is not None:
            proved.setdefault(node, []).append(what)
    return {node: "; ".join(dict.fromkeys(shown)) for node, shown in proved.items()}


def rule_of(shown: Shown) -> tuple[str, Here | Proven | Costly] | None:
    return next(((pattern, check) for pattern, check in RULES if re.search(pattern, shown.command)), None)


# Each verb's real run, beside its --help (test_every_verb_answers_help_...): gantry's against the stand-ins, selfplay's
# in the local journey here. test_shown_commands.py checks that every verb has one.
VERB_RUNS: dict[str, Here | Proven | Costly] = {
    "gantry run-local": RUN_LOCAL,
    "gantry preflight": Proven(f"{LAUNCHER}/test_launcher_preflight.py::test_ready_cpu_deployment_passes_and_prints_cost"),
    "gantry cost": Proven(f"{LAUNCHER}/test_launcher_cli.py::test_cost_needs_no_cloud"),
    "gantry apply": Proven(f"{LAUNCHER}/test_launcher_apply.py::test_apply_runs_preflight_then_terraform"),
    "gantry build": TWIN,
    "gantry push": TWIN,
    "gantry run": Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                         "test_run_starts_stopped_nodes_and_writes_a_spec_per_rank_keeping_other_keys"),
    "gantry status": Proven(f"{LAUNCHER}/test_launcher_runs.py::test_status_shows_each_node_and_the_kit_trainers_figures_and_pons_errors_as_its_gantry_yaml_names_them"),
    "gantry logs": Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                          "test_logs_reads_the_masters_serial_port_and_follows_from_offsets"),
    "gantry stop": Proven(f"{LAUNCHER}/test_launcher_runs.py::test_stop_sets_action_stop_on_every_started_node"),
    "gantry fetch": Proven(f"{LAUNCHER}/test_launcher_runs.py::"
                           "test_fetch_copies_the_whole_run_but_not_partial_uploads_and_then_only_what_changed"),
    "gantry destroy": Proven(f"{LAUNCHER}/test_launcher_destroy.py::test_clean_teardown_proves_nothing_is_left"),
    "gantry devcontainer": DEVCONTAINER_RUN,
    "python -m selfplay train": LOCAL,  # make train-local
    "python -m selfplay launch": DISTRIBUTED,
    "python -m selfplay check": CHECK,
    "python -m selfplay eval": LOCAL,  # make eval
    "python -m selfplay arena": LOCAL,  # make arena
    "python -m selfplay plot": LOCAL,  # make plot
}
