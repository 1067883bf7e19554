"""The verifygate command end to end: exit statuses, formats, the report, signals."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from pytest_verifygate.report.document import load_schema

from conftest import commit_all, verifygate, write

# Real processes end to end (gates, git, pytest or pre-commit runs): outside the fast loop.
pytestmark = pytest.mark.slow

CONTRACT = f"""
[[gate]]
name = "ok"
command = ["{sys.executable}", "-c", "print('fine')"]
when_changed = ["**/*.py"]

[[gate]]
name = "bad"
command = ["{sys.executable}", "-c", "import sys; print('broken'); sys.exit(1)"]
when_changed = ["src/**"]

[[gate]]
name = "docs"
command = "true"
when_changed = ["docs/**"]
"""


def python(code: str, cwd: Path | None = None,
           check: bool = False) -> subprocess.CompletedProcess[str]:
    """``code`` run by a Python of its own (what a command's start-up does is seen whole)."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, check=check)


def test_run_exit_status_and_schema_valid_report(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "src" / "a.py", "x = 1\n")
    done = verifygate("run", "--files", "src/a.py", "--json", "out/report.json", cwd=repo)
    assert done.returncode == 1, done.stderr
    assert "FAIL  bad" in done.stdout and "PASS  ok" in done.stdout
    assert "verdict: failed (1 passed, 1 failed, 0 skipped, 0 pending)" in done.stdout
    report = json.loads((repo / "out" / "report.json").read_text())
    jsonschema.validate(report, load_schema())
    assert report["verdict"] == "failed"
    assert report["changes"] == {"source": "files", "ref": None, "files": ["src/a.py"]}
    assert [g["name"] for g in report["gates"]] == ["ok", "bad"]
    bad = report["gates"][1]
    assert (bad["code"], bad["exit_code"], bad["output_tail"]) == ("command_failed", 1,
                                                                  "broken\n")
    assert report["not_selected"] == [
        {"name": "docs", "reason": "no changed file matches when_changed [docs/**]"}]


def test_format_json_and_agent(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "x.py", "x = 1\n")
    done = verifygate("run", "--files", "x.py", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["verdict"] == "passed" and report["summary"]["passed"] == 1
    agent = verifygate("run", "--all", "--format", "agent", cwd=repo)
    assert agent.returncode == 1
    assert agent.stdout.startswith("## verifygate: 1 of 3 gate(s) failed: `bad`")
    assert "### `bad` failed: command_failed, exit status 1" in agent.stdout


def test_unverified_and_fail_when_unverified(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "README.md", "# readme\n")
    done = verifygate("run", "--files", "README.md", cwd=repo)
    assert done.returncode == 0 and "verdict: unverified" in done.stdout
    write(repo / "verify.toml", "[settings]\nfail_when_unverified = true\n" + CONTRACT)
    done = verifygate("run", "--files", "README.md", cwd=repo)
    assert done.returncode == 1 and "verdict: failed" in done.stdout


def test_list_shows_every_gate_with_its_reason(repo: Path) -> None:
    write(repo / "verify.toml", CONTRACT)
    write(repo / "src" / "a.py", "x = 1\n")
    write(repo / "docs" / "x.md", "# x\n")
    done = verifygate("list", "--files-from", "-", "--format", "json", cwd=repo,
                      stdin="src/a.py\0docs/x.md\0")
    assert done.returncode == 0, done.stderr
    gates = json.loads(done.stdout)["gates"]
    assert [(g["name"], g["selected"]) for g in gates] == [("ok", True), ("bad", True),
                                                          ("docs", True)]
    text = verifygate("list", "--files", "docs/x.md", cwd=repo)
    assert "skip  ok" in text.stdout and "run   docs" in text.stdout


def test_errors_are_one_line_with_status_2(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "a"\ncommand = "x"\ntimeout = 3\n')
    done = verifygate("run", "--all", cwd=repo)
    assert done.returncode == 2
    assert done.stderr == ("verifygate: error: verify.toml: gate 'a': key 'timeout': unknown key "
                           "in [[gate]] (did you mean 'timeout_seconds'?)\n")
    write(repo / "verify.toml", CONTRACT)
    commit_all(repo)
    done = verifygate("run", "--changed-from", "nope", cwd=repo)
    assert done.returncode == 2 and "unknown git ref 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    done = verifygate("run", "--staged", "--all", cwd=repo)
    assert done.returncode == 2 and "not allowed with argument" in done.stderr
    done = verifygate("run", "--jobs", "-3", "--all", cwd=repo)
    assert done.returncode == 2


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_writes_the_report_and_leaves_no_process(repo: Path, signum: int) -> None:
    write(repo / "verify.toml", """
[settings]
jobs = 2
[[gate]]
name = "quick"
command = "true"
[[gate]]
name = "hang"
shell = true
command = "sleep 300 & echo $! > bg.pid; sleep 300"
[[gate]]
name = "waiting"
command = "sleep 300"
""")
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_verifygate.cli", "run", "--all", "--jobs", "2",
         "--json", "report.json", "--junit", "junit.xml"],
        cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    end = time.monotonic() + 20
    while not (repo / "bg.pid").exists() and time.monotonic() < end:
        time.sleep(0.05)
    process.send_signal(signum)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr
    report = json.loads((repo / "report.json").read_text())
    assert report["interrupted"] is True
    outcomes = {g["name"]: (g["outcome"], g["code"]) for g in report["gates"]}
    assert outcomes["hang"] == ("failed", "interrupted")
    assert outcomes["waiting"] == ("failed", "interrupted")
    assert report["summary"] == {"passed": 1, "failed": 0, "skipped": 0, "pending": 0,
                                 "interrupted": 2}
    # JUnit: a gate cut short could not finish, a <failure> typed interrupted (junit-10.xsd
    # has no <error> in a testcase): never a pass.
    suite = ET.parse(repo / "junit.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors")) == ("2", "0")
    assert [case.get("name") for case in suite.iter("testcase")
            if case.find("failure[@type='interrupted']") is not None] == ["hang", "waiting"]
    pid = int((repo / "bg.pid").read_text())
    end = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
        if stat and stat.rsplit(")", 1)[1].split()[0] == "Z":
            break
        time.sleep(0.05)
    else:
        assert not Path(f"/proc/{pid}").exists()


def test_version_does_not_import_pytest() -> None:
    code = ("import sys; from pytest_verifygate.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
            "assert 'pytest' not in sys.modules and '_pytest' not in sys.modules, 'pytest loaded'")
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("verifygate ")


def test_the_plugins_the_contract_names_are_loaded_and_no_others(
    repo: Path, tmp_path: Path
) -> None:
    site = tmp_path / "site"
    # Unmarked, as pytest takes a plugin's hook functions: the same plugin means the same here.
    write(site / "vg_extra.py", """
def pytest_verifygate_modifyreport(report):
    report["extra"] = "from a named plugin"
""")
    env = {"PYTHONPATH": str(site)}
    gate = '[[gate]]\nname = "ok"\ncommand = "true"\n'
    write(repo / "verify.toml", '[settings]\nplugins = ["vg_extra"]\n\n' + gate)
    with_plugin = verifygate("run", "--all", "--format", "json", cwd=repo, env=env)
    assert with_plugin.returncode == 0, with_plugin.stderr
    assert json.loads(with_plugin.stdout)["extra"] == "from a named plugin"
    # Importable, even installed, but not named: a plugin does not join a run by itself.
    write(repo / "verify.toml", gate)
    without = verifygate("run", "--all", "--format", "json", cwd=repo, env=env)
    assert "extra" not in json.loads(without.stdout)


@pytest.mark.parametrize(("plugins", "message"), [
    ('["vg_missing"]', "key 'settings.plugins': cannot load plugin 'vg_missing': "
                       "ModuleNotFoundError: No module named 'vg_missing' (install it where "
                       "verifygate runs, or remove it)"),
    ('["vg_broken"]', "key 'settings.plugins': cannot load plugin 'vg_broken': "
                      "RuntimeError: broken at import"),
    ('["not a module"]', "key 'settings.plugins': 'not a module' is not a module name"),
    ('"vg_extra"', "key 'settings.plugins': must be a list of strings, not a string"),
    ('["vg_skipping"]', "key 'settings.plugins': cannot load plugin 'vg_skipping': Skipped: "
                        "not here"),
])
def test_a_plugin_that_cannot_load_is_a_contract_error(
    repo: Path, tmp_path: Path, plugins: str, message: str
) -> None:
    """Run without it, the gates would not be the ones the contract declares."""
    write(tmp_path / "site" / "vg_broken.py", "raise RuntimeError('broken at import')\n")
    write(tmp_path / "site" / "vg_skipping.py",
          "import pytest\npytest.skip('not here', allow_module_level=True)\n")
    write(repo / "verify.toml", f'[settings]\nplugins = {plugins}\n\n'
                                '[[gate]]\nname = "ok"\ncommand = "true"\n')
    done = verifygate("run", "--all", cwd=repo, env={"PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr and "PASS" not in done.stdout


def test_a_plugin_error_names_the_key_as_pyproject_spells_it(repo: Path) -> None:
    write(repo / "pyproject.toml", '[tool.verifygate.settings]\nplugins = ["vg_missing"]\n\n'
                                   '[[tool.verifygate.gate]]\nname = "ok"\ncommand = "true"\n')
    done = verifygate("run", "--all", cwd=repo)
    assert done.returncode == 2
    assert ("pyproject.toml: key 'tool.verifygate.settings.plugins': cannot load plugin"
            in done.stderr)


def test_an_unwritable_report_path_is_one_line_and_status_2(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "true"\n')
    write(repo / "blocker", "a file where a directory should be\n")
    done = verifygate("run", "--all", "--json", "blocker/report.json", cwd=repo)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "cannot write the JSON report blocker/report.json" in done.stderr


def test_changed_from_head_works_before_the_first_commit(repo: Path) -> None:
    write(repo / "verify.toml", '[[gate]]\nname = "py"\ncommand = "true"\n'
                                'when_changed = ["*.py"]\n')
    write(repo / "new.py", "x = 1\n")
    done = verifygate("list", "--changed-from", "HEAD", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gates"][0]["selected"] is True


def test_the_command_line_exits_fast_with_all_its_output(repo: Path) -> None:
    """The console script skips interpreter teardown: nothing printed may be lost to it."""
    gates = "".join(f'[[gate]]\nname = "g{index:03d}"\ncommand = "true"\n' for index in range(150))
    write(repo / "verify.toml", gates)
    done = verifygate("run", "--all", "--jobs", "8", "--format", "json", cwd=repo)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # complete: the whole report made it through the pipe
    assert len(report["gates"]) == 150 and report["verdict"] == "passed"


def test_a_reader_that_goes_away_early_gets_no_traceback(repo: Path) -> None:
    write(repo / "verify.toml", "".join(
        f'[[gate]]\nname = "g{index}"\ncommand = "true"\n' for index in range(300)))
    script = (f"{sys.executable} -m pytest_verifygate.cli run --all --jobs 8 --format json"
              " | head -c 1")
    done = subprocess.run(["sh", "-c", script], cwd=repo, capture_output=True, text=True)
    assert done.stdout == "{"
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


@pytest.mark.parametrize(("command", "gates"), [("list --all", 3000),
                                              ("run --all --jobs 8 --json report.json", 300)])
def test_text_output_into_a_reader_that_stops_early_ends_quietly(repo: Path, command: str,
                                                                 gates: int) -> None:
    # More output than a pipe holds, so writes meet the closed pipe whatever the timing.
    write(repo / "verify.toml", "".join(
        f'[[gate]]\nname = "g{index}"\ncommand = "true"\n' for index in range(gates)))
    # The status of verifygate itself, not of head: the gates all ran, the verdict stands.
    script = (f"{{ {sys.executable} -m pytest_verifygate.cli {command}; echo $? > status; }}"
              " | head -n 1")
    done = subprocess.run(["sh", "-c", script], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert len(done.stdout.splitlines()) == 1
    assert done.stderr == ""
    assert (repo / "status").read_text().strip() == "0"
    if "report.json" in command:
        report = json.loads((repo / "report.json").read_text())
        assert report["summary"]["passed"] == gates


@pytest.mark.parametrize("closed", [">&-", "2>&-", ">&- 2>&-"])
@pytest.mark.parametrize(("command", "status"), [("true", 0), ("false", 1)])
def test_a_closed_stdout_or_stderr_still_runs_reports_and_exits_with_the_verdict(
        repo: Path, closed: str, command: str, status: int) -> None:
    """Started with a standard stream closed (not a pipe: no descriptor at all), the run still
    happens, the report is still written and the status is the verdict's."""
    write(repo / "verify.toml", f'[[gate]]\nname = "g"\ncommand = "{command}"\n')
    script = (f"{sys.executable} -m pytest_verifygate.cli run --all --json report.json {closed};"
              " echo $? > status")
    done = subprocess.run(["sh", "-c", script], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert "Traceback" not in done.stderr, done.stderr
    assert (repo / "status").read_text().strip() == str(status), done.stderr
    report = json.loads((repo / "report.json").read_text())
    assert report["verdict"] == ("passed" if status == 0 else "failed")


def test_list_shows_what_run_would_do(repo: Path) -> None:
    write(repo / "verify.toml", f"""
[[gate]]
name = "compile"
command = ["{sys.executable}", "-m", "compileall", "-q", "{{files}}"]
when_changed = ["*.py"]

[[gate]]
name = "sign-off"
kind = "manual"
command = "a person looks at it"
""")
    write(repo / "gone.py", "x = 1\n")
    commit_all(repo)
    (repo / "gone.py").unlink()
    # Deleting a module selects compile, but {{files}} has nothing left to name: run skips it.
    ran = verifygate("run", "--changed-from", "HEAD", "--format", "json", cwd=repo)
    assert [(g["name"], g["outcome"], g["reason"]) for g in json.loads(ran.stdout)["gates"]] \
        == [("compile", "skipped", "no matching files for {files}"),
            ("sign-off", "pending", "manual gate: awaits human sign-off")]
    text = verifygate("list", "--changed-from", "HEAD", cwd=repo).stdout
    assert ("  skip  compile   no matching files for {files} (changed 'gone.py' (deleted) "
            "matches when_changed)") in text
    assert "  pend  sign-off  manual gate: awaits human sign-off" in text
    listed = json.loads(verifygate("list", "--changed-from", "HEAD", "--format", "json",
                                   cwd=repo).stdout)["gates"]
    assert [(g["name"], g["selected"], g["runs"]) for g in listed] == [
        ("compile", True, False), ("sign-off", True, False)]
    write(repo / "new.py", "y = 2\n")
    listed = json.loads(verifygate("list", "--changed-from", "HEAD", "--format", "json",
                                   cwd=repo).stdout)["gates"]
    assert listed[0]["runs"] is True


def test_exit_handlers_still_run_when_something_registered_them(repo: Path) -> None:
    """Coverage or a plugin may hook the interpreter's exit: then it is not skipped."""
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "true"\n')
    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('exit handler ran'))\n"
            "from pytest_verifygate.cli import console_main\n"
            "sys.argv = ['verifygate', 'run', '--all']\n"
            "console_main()\n")
    done = python(code, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("exit handler ran")


def test_a_commit_s_run_does_not_load_pytest(repo: Path) -> None:
    """The command pre-commit and agents call stays light: it never imports pytest."""
    write(repo / "verify.toml", '[[gate]]\nname = "ok"\ncommand = "true"\n'
          '[[gate]]\nname = "py"\ncommand = "true"\n')
    commit_all(repo)
    write(repo / "a.py", "x = 1\n")
    subprocess.run(["git", "add", "a.py"], cwd=repo, check=True)
    code = ("import sys\n"
            "from pytest_verifygate.cli import main\n"
            "status = main(['run', '--staged'])\n"
            "print(status, 'pytest' in sys.modules)\n")
    done = python(code, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "2 of 2 gate(s) selected" in done.stdout
    assert done.stdout.split()[-2:] == ["0", "False"]
