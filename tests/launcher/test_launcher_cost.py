"""The price table reproduces the list prices it was derived from; estimates add up."""

import pytest
from gantry import cost
from gantry.config import Deployment


def vm_and_gpu_hourly(deployment):
    estimate = cost.estimate(deployment)
    return sum(h for what, h in estimate.lines if not what.startswith("boot disk"))


@pytest.mark.parametrize("settings, expected", [
    ({"cpu_machine_type": "c4-highcpu-16"}, 0.68),
    ({"cpu_machine_type": "c4-highcpu-16", "spot": True}, 0.41),
    ({"use_gpu": True, "gpu_machine_type": "n1-standard-4"}, 0.54),
    ({"use_gpu": True, "gpu_machine_type": "n1-standard-4", "spot": True}, 0.21),
])
def test_table_reproduces_the_published_figures(settings, expected):
    assert vm_and_gpu_hourly(Deployment(project_id="p", **settings)) == pytest.approx(expected, abs=0.005)


def test_total_scales_with_nodes_and_run_length():
    one = cost.estimate(Deployment(project_id="p", max_run_hours=10))
    three = cost.estimate(Deployment(project_id="p", node_count=3, max_run_hours=10))
    assert three.hourly == pytest.approx(3 * one.hourly)
    assert three.run_cost == pytest.approx(30 * one.node_hourly)
    text = "\n".join(cost.render(three))
    assert "3 nodes in total" in text and "max_run_hours = 10" in text and "2026-06" in text


def test_no_time_limit_is_spelled_out():
    text = "\n".join(cost.render(cost.estimate(Deployment(project_id="p"))))
    assert "no time limit" in text and "make destroy" in text


def test_unknown_shape_is_a_note_not_a_crash():
    estimate = cost.estimate(Deployment(project_id="p", cpu_machine_type="a3-highgpu-8g"))
    assert estimate.hourly is None
    assert "prices.json" in "\n".join(cost.render(estimate))


def test_api_shape_overrides_the_name():
    estimate = cost.estimate(Deployment(project_id="p"), cpus=16, memory_gb=32)
    assert estimate.node_hourly == pytest.approx(cost.estimate(Deployment(project_id="p")).node_hourly)


def test_table_carries_source_date_and_assumptions():
    prices = cost.load_prices()
    assert prices["date"] and prices["source"] and prices["assumptions"]
    assert prices["region"] == "us-central1"
