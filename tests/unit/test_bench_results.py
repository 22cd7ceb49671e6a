"""bench.run's result files: two benches that start in the same second both keep their result."""

from bench import run


def test_a_result_named_like_an_earlier_one_is_written_beside_it_not_over_it(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    first, second = (run.write_new_result("bench-20261128-100000", text) for text in ("first", "second"))
    assert (first.name, second.name) == ("bench-20261128-100000.json", "bench-20261128-100000-2.json")
    assert (first.read_text(), second.read_text()) == ("first", "second")
