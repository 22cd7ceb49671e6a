"""The grading worker beside training stops with the trainer, a grading under way included: a SIGTERM's seconds
belong to the final checkpoint, not to a result nobody will read."""

import subprocess
import sys
import textwrap


def test_a_trainer_exits_without_waiting_for_the_grading_under_way(tmp_path):
    started = tmp_path / "grading-started"
    script = textwrap.dedent(f"""
        import os, time
        from selfplay.actors import background_pool, stop_background_pool
        pool = background_pool()
        # a grading that would outlast any grace (exec: a builtin, so the spawned worker can unpickle it)
        pool.submit(exec, "import pathlib, time; pathlib.Path('{started}').touch(); time.sleep(600)")
        while not os.path.exists("{started}"):
            time.sleep(0.05)
        stop_background_pool(pool)
        print("stopped")
    """)
    # without the worker's end the interpreter joins it at exit: this would hang for the job's 600 s
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stderr
