"""bench.run's result files and run directories: two benches that start in the same second both keep their own."""

from bench import run


def test_a_result_named_like_an_earlier_one_is_written_beside_it_not_over_it(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    first, second = (run.write_new_result("bench-20261128-100000", text) for text in ("first", "second"))
    assert (first.name, second.name) == ("bench-20261128-100000.json", "bench-20261128-100000-2.json")
    assert (first.read_text(), second.read_text()) == ("first", "second")


def test_a_run_directory_named_like_an_earlier_one_is_a_new_empty_one_beside_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = run.new_run_dir("bench-20261128-100000-seed1337")
    (first / "ckpt-000100.pt").write_text("the first bench's run")   # a directory the trainer would resume
    second = run.new_run_dir("bench-20261128-100000-seed1337")
    assert (first.name, second.name) == ("bench-20261128-100000-seed1337", "bench-20261128-100000-seed1337-2")
    assert (tmp_path / "runs" / second.name).is_dir() and list(second.iterdir()) == []
