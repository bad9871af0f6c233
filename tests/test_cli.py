import subprocess
import sys

from typer.testing import CliRunner

from anonymizer.cli import app

runner = CliRunner()


def test_run_prints_a_summary_and_exits_0(hospital):
    result = runner.invoke(app, ["run", "--config", str(hospital)])
    assert result.exit_code == 0, result.output
    assert "anonymized" in result.stdout and "notes/s" in result.stdout


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
