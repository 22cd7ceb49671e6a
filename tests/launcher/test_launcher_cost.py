"""The price table reproduces the list prices it was derived from; estimates add up."""

import json

import pytest
from gantry import cost
from launcher_helpers import REPO, gantry_deployment, needs_terraform

# the deployments are infra/'s defaults, read through the terraform binary
pytestmark = needs_terraform


def vm_and_gpu_hourly(deployment):
    estimate = cost.estimate(deployment)
    return sum(h for what, h in estimate.lines if not what.startswith("boot disk"))


@pytest.mark.parametrize("settings, expected", [
    ({"cpu_machine_type": "c4-highcpu-16"}, 0.68),
    ({"cpu_machine_type": "c4-highcpu-16", "spot": True}, 0.41),
    ({"use_gpu": True, "gpu_machine_type": "n1-standard-4"}, 0.54),
    ({"use_gpu": True, "gpu_machine_type": "n1-standard-4", "spot": True}, 0.21),
    # the SkyPilot catalog's us-central1 rows (prices.json): g2-standard-8's host and one L4; a2-highgpu-4g and 4 A100s
    ({"use_gpu": True, "accelerator_type": "nvidia-l4"}, 0.29358 + 0.56004),
    ({"use_gpu": True, "accelerator_type": "nvidia-l4", "spot": True}, 0.11747 + 0.2231),
    ({"use_gpu": True, "accelerator_type": "nvidia-tesla-a100", "accelerator_count": 4}, 2.95791 + 4 * 2.93391),
])
def test_table_reproduces_the_published_figures(settings, expected):
    assert vm_and_gpu_hourly(gantry_deployment(**settings)) == pytest.approx(expected, abs=0.005)


def test_total_scales_with_nodes_and_run_length():
    one = cost.estimate(gantry_deployment(max_run_hours=10))
    three = cost.estimate(gantry_deployment(node_count=3, max_run_hours=10))
    assert three.hourly == pytest.approx(3 * one.hourly)
    assert three.run_cost == pytest.approx(30 * one.node_hourly)
    text = "\n".join(cost.render(three))
    assert "3 nodes in total" in text and "max_run_hours = 10" in text and "2026-06" in text


def test_no_time_limit_is_spelled_out():
    text = "\n".join(cost.render(cost.estimate(gantry_deployment(max_run_hours=0))))
    assert "no time limit" in text and "make destroy" in text


def test_unknown_shape_is_a_note_not_a_crash():
    estimate = cost.estimate(gantry_deployment(cpu_machine_type="a3-highgpu-8g"))
    assert estimate.hourly is None
    assert "prices.json" in "\n".join(cost.render(estimate))


def test_a_gpu_with_no_trustworthy_price_says_why_instead_of_a_total():
    estimate = cost.estimate(gantry_deployment(use_gpu=True, accelerator_type="nvidia-h100-80gb", accelerator_count=8))
    assert estimate.hourly is None
    assert "no price for a3-highgpu-8g in the table (A3 is not: the catalog's H100 on-demand rows disagree" in \
        "\n".join(cost.render(estimate))


def test_api_shape_overrides_the_name():
    estimate = cost.estimate(gantry_deployment(), cpus=16, memory_gb=32)
    assert estimate.node_hourly == pytest.approx(cost.estimate(gantry_deployment()).node_hourly)


def test_table_carries_source_date_and_assumptions():
    prices = cost.load_prices()
    assert prices["date"] and prices["source"] and prices["assumptions"]
    assert prices["region"] == "us-central1"


# ---- TPU VMs (use_tpu) ----

def tpu(**settings):
    return gantry_deployment(use_tpu=True, max_run_hours=8, **settings)


@pytest.mark.parametrize("settings, expected", [
    ({"tpu_type": "v2-8"}, 4.50),  # the single-device prices the per-chip rates come from
    ({"tpu_type": "v2-8", "spot": True}, 1.35),
    ({"tpu_type": "v3-8"}, 8.00),
    ({"tpu_type": "v3-8", "spot": True}, 2.40),
    ({"tpu_type": "v4-8"}, 4 * 3.22),
    ({"tpu_type": "v5litepod-8"}, 8 * 1.20),
])
def test_tpu_vm_is_priced_per_chip_hour(settings, expected):
    estimate = cost.estimate(tpu(**settings))
    assert estimate.hourly == pytest.approx(expected)
    assert estimate.run_cost == pytest.approx(8 * expected)
    (what, _), = estimate.lines  # one line: the TPU VM, host and boot disk included in its price
    assert what.startswith(f"{settings['tpu_type']} TPU VM (") and what.endswith("Spot" if settings.get("spot") else "on-demand")


def test_trc_says_free_and_still_shows_the_list_price():
    text = "\n".join(cost.render(cost.estimate(tpu(tpu_type="v3-8"), trc=True)))
    assert "free under a TRC allocation" in text
    assert "$ 8.000/h" in text and "$192.00 a day" in text  # what it would cost without TRC
    assert "a run of max_run_hours = 8" in text and "$ 64.00" in text


def test_without_trc_a_tpu_is_not_called_free():
    text = "\n".join(cost.render(cost.estimate(tpu(tpu_type="v3-8"))))
    assert "TRC" not in text and "$ 8.000/h" in text


def test_trc_does_not_make_cpu_or_gpu_nodes_free():
    estimate = cost.estimate(gantry_deployment(use_gpu=True), trc=True)
    text = "\n".join(cost.render(estimate))
    assert not estimate.free_under_trc and "free under" not in text
    assert "TRC allocation covers TPUs only" in text


def test_tpu_region_other_than_the_tables_is_a_note():
    estimate = cost.estimate(tpu(tpu_type="v4-8", region="us-central1", zone="us-central1-a"))
    assert "us-central2" in "\n".join(cost.render(estimate))


def test_unknown_tpu_type_is_a_note_not_a_crash():
    estimate = cost.estimate(tpu(tpu_type="v9-8"))
    assert estimate.hourly is None and "prices.json" in "\n".join(cost.render(estimate))


def test_tpu_table_carries_source_date_and_covers_every_type_infra_offers():
    tpus = cost.load_prices()["tpus"]
    assert tpus["source"].startswith("https://cloud.google.com/tpu/pricing") and tpus["date"] and tpus["assumptions"]
    zones = json.loads((REPO / "infra" / "tpu_zones.json").read_text())["zones"]
    assert set(tpus["types"]) == set(zones), "price every TPU type infra/tpu_zones.json offers"
    for shape in tpus["types"].values():
        rates = tpus["generations"][shape["generation"]]
        assert 0 < rates["spot_chip_hour"] < rates["chip_hour"]


def test_make_cost_shows_both_default_time_limits():
    """A deployment with infra's defaults bills for at most max_run_hours, and its runs stop before that."""
    from gantry.config import DEFAULT_RUN_MAX_MINUTES

    default = gantry_deployment()
    assert default.max_run_hours > 0 and DEFAULT_RUN_MAX_MINUTES > 0
    assert 60 * default.max_run_hours > DEFAULT_RUN_MAX_MINUTES  # the trainer checkpoints before GCE stops it
    text = "\n".join(cost.render(cost.estimate(default)))
    assert f"a run of max_run_hours = {default.max_run_hours:g}" in text
    assert f"every `make run-gcp` launch stops {DEFAULT_RUN_MAX_MINUTES} minutes after it starts" in text
    assert 'ARGS="--max-minutes N"' in text
    readme = " ".join((REPO / "README.md").read_text().split())  # the README says whose default it is, not the trainer's
    assert f"`gantry run`'s default time limit of {DEFAULT_RUN_MAX_MINUTES} minutes after the launch" in readme
    assert f"power off after max_run_hours = {default.max_run_hours:g} hours up" in text
    assert text.count("0 = no limit") == 2  # each limit says how to remove it
