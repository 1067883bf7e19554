#!/usr/bin/env bash
# A walk through pytest-verifygate on a real project: example-repo/ (the `tally` package) is
# copied to a temporary git repository, a change breaks one of its gates, and the demo shows
# which gates that change selects, the failure with its code, the JSON report, a JUnit file,
# the same gates as pytest items, and a commit blocked by the pre-commit hook until the fix.
#
#   make demo                   # from the repository root: installs .venv, then runs this
#   bash example-repo/demo.sh   # needs `verifygate` and `python` (with pytest) on PATH
#   KEEP=1 bash example-repo/demo.sh   # keep the temporary repository to look around
#
# Exit status 0 when everything behaved as designed (the broken gate failed with the expected
# code, the other gates passed, the commit was blocked and then let through), 1 otherwise.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
problems=()

bold=""; dim=""; reset=""
if [[ -t 1 ]]; then bold=$'\033[1m'; dim=$'\033[2m'; reset=$'\033[0m'; fi

heading() { printf '\n%s== %s ==%s\n' "$bold" "$*" "$reset"; }
show() { printf '%s$ %s%s\n' "$dim" "$*" "$reset"; }
expect() {  # expect WHAT EXPECTED ACTUAL
    if [[ "$2" == "$3" ]]; then
        printf '  ok: %s\n' "$1"
    else
        printf '  UNEXPECTED: %s: expected %s, got %s\n' "$1" "$2" "$3"
        problems+=("$1")
    fi
}
# Run a command that is expected to exit with a given status; print its output, return 0.
run_expecting() {  # run_expecting STATUS WHAT COMMAND...
    local want="$1" what="$2" status=0
    shift 2
    show "$*"
    "$@" || status=$?
    expect "$what exits $want" "$want" "$status"
}

for tool in verifygate python git; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "demo: '$tool' is not on PATH; run 'make demo' from the repository root" >&2
        exit 2
    fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/verifygate-demo.XXXXXX")"
if [[ "${KEEP:-}" == 1 ]]; then
    trap 'echo; echo "demo: kept $work"' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
repo="$work/tally"
out="$work/out"  # reports live outside the repository, so they never count as changes
mkdir -p "$out"

# The demo's git and pre-commit see nothing of the user's own configuration or caches.
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 PRE_COMMIT_HOME="$work/pre-commit"
unset PRE_COMMIT PRE_COMMIT_FROM_REF PRE_COMMIT_TO_REF VERIFYGATE_CHANGED_FROM
# The demo plays the implementer and the reviewer: gates with `roles` run only for a role asked
# for (--role, or this variable), so cli-tests and the reviewer's sign-off take part.
export VERIFYGATE_ROLE=implementer,reviewer

heading "1. The project: example-repo/ as a fresh git repository"
mkdir "$repo"
(cd "$here" && tar --exclude=__pycache__ --exclude=.pytest_cache --exclude=.ruff_cache \
    --exclude=.mypy_cache --exclude=.venv --exclude=demo.sh -cf - .) |
    (cd "$repo" && tar -xf -)
cd "$repo"
git -c init.defaultBranch=main init -q
git config user.name "Demo"
git config user.email "demo@example.invalid"
git config commit.gpgsign false
git add -A
git commit -q -m "tally 0.3.0"
show "cd $repo"
show "git log --oneline"
git log --oneline
echo
echo "Its verify contract, verify.toml, has five gates. On the clean checkout every command"
echo "gate passes; the manual sign-off gate stays pending (a verdict of 'pending', exit 0):"
run_expecting 0 "verifygate run --all on the clean checkout" verifygate run --all

heading "2. A change: accept '\$' in amounts (and, by mistake, break '(12.00)' negatives)"
python - <<'EOF'
from pathlib import Path

path = Path("src/tally/amounts.py")
text = path.read_text(encoding="utf-8")
# The author strips currency signs with str.strip, which also strips the parentheses that
# mark an accounting-style negative amount.
path.write_text(
    text.replace('.replace(",", "")\n', '.replace(",", "").strip("$()")\n', 1),
    encoding="utf-8",
)
EOF
show "git diff"
git --no-pager diff
expect "the change touches one file" "src/tally/amounts.py" "$(git diff --name-only)"

heading "3. Which gates this change needs"
show "verifygate list --changed-from HEAD"
verifygate list --changed-from HEAD
selected="$(verifygate list --changed-from HEAD --format json | python -c '
import json, sys
print(" ".join(g["name"] for g in json.load(sys.stdin)["gates"] if g["selected"]))')" ||
    selected="(verifygate list failed)"
expect "selected gates" "compile unit-tests cli-tests amounts-review" "$selected"

heading "4. Run them (expected to fail: exit 1)"
run_expecting 1 "verifygate run" \
    verifygate run --changed-from HEAD --json "$out/report.json"

heading "5. The JSON report (excerpt of $out/report.json)"
python - "$out/report.json" <<'EOF' || true
import json
import sys

report = json.load(open(sys.argv[1], encoding="utf-8"))
excerpt = {
    "verdict": report["verdict"],
    "changes": report["changes"],
    "summary": report["summary"],
    "gates": [
        {key: gate[key] for key in ("name", "outcome", "code", "exit_code", "duration_s")}
        for gate in report["gates"]
    ],
    "not_selected": report["not_selected"],
}
print(json.dumps(excerpt, indent=2))
EOF
outcomes() {  # outcomes REPORT: "name=outcome/code ..." in contract order
    python - "$1" <<'EOF' 2>/dev/null || echo "(no readable report at $1)"
import json
import sys

report = json.load(open(sys.argv[1], encoding="utf-8"))
print(" ".join(f"{g['name']}={g['outcome']}/{g['code'] or '-'}" for g in report["gates"]))
EOF
}
expected_outcomes="compile=passed/- unit-tests=failed/command_failed cli-tests=passed/- \
amounts-review=pending/-"
expect "gate outcomes in the report" "$expected_outcomes" "$(outcomes "$out/report.json")"

heading "6. The same gates as pytest items (expected to fail: exit 1)"
# JUnit family xunit1: each testcase carries the verifygate.* properties (pytest's default,
# xunit2, allows none in a testcase).
run_expecting 1 "pytest --verify-contract" \
    python -m pytest --verify-contract --verify-changed-from HEAD \
    --verify-report "$out/pytest-report.json" --junitxml "$out/junit.xml" \
    -o junit_family=xunit1 -p no:cacheprovider verify.toml
if [[ -f "$out/pytest-report.json" ]]; then
    expect "gate outcomes in pytest's report" "$expected_outcomes" \
        "$(outcomes "$out/pytest-report.json")"
else
    expect "pytest wrote its report" "$out/pytest-report.json" "no file"
fi

heading "7. The JUnit file ($out/junit.xml)"
if [[ -f "$out/junit.xml" ]]; then
    python - "$out/junit.xml" "$out/junit-code.txt" <<'EOF' || true
import sys
import xml.etree.ElementTree as ET

# Each <testcase> with its outcome and verifygate.* properties; the code of unit-tests goes to
# a file for the check below.
code = "no testcase named unit-tests"
for case in ET.parse(sys.argv[1]).getroot().iter("testcase"):
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    failure = case.find("failure")
    skipped = case.find("skipped") is not None
    outcome = "failed" if failure is not None else "skipped" if skipped else "passed"
    message = (failure.get("message") or "").splitlines()[0] if failure is not None else ""
    print(f"  <testcase {case.get('classname')}::{case.get('name')}>: {outcome}"
          + (f" - {message[:100]}" if message else ""))
    for name, value in props.items():
        if name and name.startswith("verifygate."):
            print(f"      {name} = {value}")
    if case.get("name", "").endswith("unit-tests"):
        code = props.get("verifygate.code") or "no verifygate.code property"
with open(sys.argv[2], "w", encoding="utf-8") as handle:
    handle.write(code)
EOF
fi
junit_code="$(cat "$out/junit-code.txt" 2>/dev/null || echo "no readable JUnit file")"
expect "JUnit verifygate.code of unit-tests" "command_failed" "$junit_code"

heading "8. The pre-commit hook: the commit is blocked until the change is fixed"
if command -v pre-commit >/dev/null 2>&1; then
    show "pre-commit install"
    pre-commit install || problems+=("pre-commit install")
    git add -A
    before="$(git rev-parse HEAD)"
    run_expecting 1 "git commit with the broken change" \
        git commit -q -m "Accept currency signs in amounts"
    expect "HEAD after the blocked commit" "$before" "$(git rev-parse HEAD)"
    echo
    echo "The fix: remove only the currency sign, and test the new feature."
    python - <<'EOF'
from pathlib import Path

code = Path("src/tally/amounts.py")
text = code.read_text(encoding="utf-8")
code.write_text(text.replace('.strip("$()")', '.replace("$", "")', 1), encoding="utf-8")
tests = Path("tests/unit/test_amounts.py")
text = tests.read_text(encoding="utf-8")
new_case = '        ("$1,200.00", Decimal("1200.00")),\n        ("($5)", Decimal(-5)),\n'
anchor = '        ("(1,000)", Decimal(-1000)),\n'
tests.write_text(text.replace(anchor, anchor + new_case, 1), encoding="utf-8")
EOF
    show "git diff"
    git --no-pager diff
    expect "the fix touches the code and its test" \
        "src/tally/amounts.py tests/unit/test_amounts.py" "$(git diff --name-only | xargs)"
    git add -A
    run_expecting 0 "git commit with the fix" git commit -q -m "Accept currency signs in amounts"
    show "git log --oneline"
    git log --oneline
    expect "commits after the fix" "2" "$(git rev-list --count HEAD)"
else
    echo "pre-commit is not installed (pip install 'pytest-verifygate[pre-commit]'): skipped"
fi

heading "Result"
if ((${#problems[@]})); then
    echo "demo: ${#problems[@]} step(s) did not behave as designed:"
    printf '  - %s\n' "${problems[@]}"
    exit 1
fi
echo "demo: everything behaved as designed: the change selected 4 of 5 gates, 'unit-tests'"
echo "failed with code command_failed (CLI, JSON report, pytest and JUnit agree), the other"
echo "gates passed or await sign-off, and pre-commit blocked the commit until the fix."
