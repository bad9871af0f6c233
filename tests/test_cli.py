import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from anonymizer.cli import app

runner = CliRunner()


def test_run_prints_a_summary_and_exits_0(hospital):
    result = runner.invoke(app, ["run", "--config", str(hospital)])
    assert result.exit_code == 0, result.output
    assert "anonymized" in result.stdout and "notes/s" in result.stdout


def test_a_run_called_in_process_gives_back_the_programs_sigterm_handler(hospital):
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert runner.invoke(app, ["run", "--config", str(hospital)]).exit_code == 0
    assert signal.getsignal(signal.SIGTERM) is before


def test_configuration_errors_exit_2_with_one_line(hospital, tmp_path):
    hospital.write_text(hospital.read_text().replace('text = "body"', 'text = "bodyy"'))
    for args in (["run", "--config", str(hospital)], ["run", "--config", str(tmp_path / "none.toml")]):
        result = subprocess.run([sys.executable, "-m", "anonymizer", *args], capture_output=True, text=True)
        assert result.returncode == 2
        assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert not (tmp_path / "target.db").exists(), "nothing may be written before the configuration is checked"


def test_unreachable_server_exits_2_without_a_traceback(hospital):
    text = hospital.read_text().replace("sqlite:///", "postgresql+psycopg://nobody@127.0.0.1:1/", 1)
    hospital.write_text(text)
    result = subprocess.run([sys.executable, "-m", "anonymizer", "run", "-c", str(hospital)], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.startswith("error: source.url: cannot connect") and "Traceback" not in result.stderr


def error_line(args: list[str]) -> str:
    """The CLI run in its own process: exit 2 and one `error:` line on stderr, no traceback."""
    result = subprocess.run([sys.executable, "-m", "anonymizer", *args], capture_output=True, text=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize(
    "content, line", [("Dr Tan\nJosé Müller\n".encode("latin-1"), 2), (b"Dr Tan\nQuiley\n\x89PNG\x00\x01", 3)], ids=["latin1", "binary"]
)
def test_a_list_file_that_is_not_utf8_text_is_one_line_naming_the_file_and_line(hospital, tmp_path, content, line):
    (tmp_path / "doctors.txt").write_bytes(content)
    hospital.write_text(hospital.read_text() + f'\n[[lists]]\ncategory = "DOCTOR"\nfile = "{tmp_path / "doctors.txt"}"\n')
    message = error_line(["run", "--config", str(hospital)])
    assert f"doctors.txt: line {line} is not UTF-8" in message
    assert "Müller" not in message and "PNG" not in message
    assert not (tmp_path / "target.db").exists()


def started_with_workers(databases, tmp_path, command: str):
    """`command` (run or reprocess) on 4,000 notes with 2 workers, once both workers are up:
    the process, its workers and what a test checks afterwards."""
    import random
    import time

    from tests.conftest import create_hospital
    from tests.servers import write_config
    from tests.test_crash import descendants, hospital

    source, target = databases.url("sqlite", "src"), databases.url("sqlite", "dst")
    patients, notes = hospital(random.Random(7), notes=4000)
    create_hospital(source, patients=patients, notes=notes)
    config = write_config(tmp_path / "anonymizer.toml", source, target)
    args = ["--patients-from", str(tmp_path / "ids.txt")] if command == "reprocess" else ["--batch-size", "20"]
    (tmp_path / "ids.txt").write_text("\n".join(str(p["patient_id"]) for p in patients))
    if command == "reprocess":
        assert subprocess.run([sys.executable, "-m", "anonymizer", "run", "-c", str(config), "-w", "1"]).returncode == 0
    process = subprocess.Popen([sys.executable, "-m", "anonymizer", command, *args, "-c", str(config), "-w", "2"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    workers: set = set()
    while len(workers) < 2 and process.poll() is None and time.monotonic() < deadline:
        workers = descendants(process.pid)
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before both workers were seen"
    return process, workers, config, source, target


@pytest.mark.parametrize("command", ["run", "reprocess"])
def test_a_killed_worker_is_one_error_line_exit_2_and_a_failed_run(databases, tmp_path, command):
    """kill -9 of a pool worker (the OOM killer): not a BrokenProcessPool traceback."""
    import signal

    from tests.servers import check_every_note_once, query

    process, workers, config, source, target = started_with_workers(databases, tmp_path, command)
    os.kill(min(workers)[0], signal.SIGKILL)  # a worker this test's run forked
    stderr = process.communicate(timeout=120)[1]
    assert process.returncode == 2, stderr
    lines = stderr.strip().splitlines()
    assert lines == [f"error: {command} failed: a worker process ended abruptly (killed, or out of memory); run again to continue"]
    assert query(target, "SELECT status FROM runs ORDER BY run_id")[-1] == ("failed",)
    assert subprocess.run([sys.executable, "-m", "anonymizer", "run", "-c", str(config), "-w", "1"]).returncode == 0
    check_every_note_once(source, target)


@pytest.mark.parametrize("command", ["run", "reprocess"])
def test_sigterm_interrupts_a_run_as_ctrl_c_does_and_leaves_no_worker(databases, tmp_path, command):
    """A scheduler's stop (SIGTERM to the main process): the run is marked interrupted, its workers
    end, and the next run continues."""
    import signal

    from tests.servers import check_every_note_once, query
    from tests.test_crash import survivors

    process, workers, config, source, target = started_with_workers(databases, tmp_path, command)
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    assert process.returncode == 130
    assert query(target, "SELECT status FROM runs ORDER BY run_id")[-1] == ("interrupted",)
    assert not survivors(workers)
    assert subprocess.run([sys.executable, "-m", "anonymizer", "run", "-c", str(config), "-w", "1"]).returncode == 0
    check_every_note_once(source, target)


def test_a_patients_file_that_is_not_utf8_text_is_one_line(hospital, tmp_path):
    (tmp_path / "ids.txt").write_bytes("1\nJosé\n".encode("latin-1"))
    message = error_line(["reprocess", "--patients-from", str(tmp_path / "ids.txt"), "--config", str(hospital)])
    assert message.startswith("error: --patients-from: ") and "not UTF-8" in message


def test_a_missing_sqlite_source_is_one_line_and_no_empty_file_is_left_there(hospital, tmp_path):
    hospital.write_text(hospital.read_text().replace(str(tmp_path / "hospital.db"), str(tmp_path / "hospitl.db")))
    assert error_line(["run", "--config", str(hospital)]) == f"error: source.url: no SQLite database at {tmp_path / 'hospitl.db'}\n"
    assert not (tmp_path / "hospitl.db").exists() and not (tmp_path / "target.db").exists()
