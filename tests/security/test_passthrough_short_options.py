"""Attack pass 3: a short option is the same option as its long spelling.

`gh auth status --show-token` is sandboxed (it prints the token that `hide` keeps from
sandboxed commands: ~/.config/gh is a default hidden path), but its short spelling
`-t` is on the list of short letters gh may take (GH_SHORT, for `--title`/`--template`
elsewhere), so `gh auth status -t` runs on the host and prints the GitHub token to the
agent.
"""

from __future__ import annotations

import pytest

from tests.claude.conftest import Claude

SHOWS_TOKEN = ["gh auth status -t", "gh auth status -at", "gh auth status -ta",
               "gh auth status --active -t"]


@pytest.mark.parametrize("command", SHOWS_TOKEN)
def test_a_short_spelling_of_a_sandboxed_option_is_sandboxed(claude: Claude, command: str):
    claude.start()
    answer = claude.pre_bash(command)
    assert answer.returncode == 0, answer.stderr
    assert answer.decision != "deny"
    ran = answer.spec.get("updatedInput", {}).get("command", command)
    assert "enter.sh" in ran, f"{command!r} runs on the host: {ran!r}"


# gh compiles --jq with gojq and the process's environment: on the host, the client's
# (its API keys and the credential variables the sandbox never gets).
READS_THE_ENVIRONMENT = ["gh api user --jq env", "gh api user -q env", "gh api user -q '$ENV'",
                         "gh api user --jq='$ENV.HOME'", "gh pr list --json title -q 'env|keys'",
                         "gh api user -q 'include \"x\"; .'"]


@pytest.mark.parametrize("command", READS_THE_ENVIRONMENT)
def test_a_jq_program_that_reads_the_environment_is_sandboxed(claude: Claude, command: str):
    claude.start()
    answer = claude.pre_bash(command)
    assert answer.decision != "deny"
    ran = answer.spec.get("updatedInput", {}).get("command", command)
    assert "enter.sh" in ran, f"{command!r} runs on the host: {ran!r}"


def test_a_plain_jq_program_still_passes_through(claude: Claude):
    claude.start()
    answer = claude.pre_bash("gh api user --jq .login")
    ran = answer.spec.get("updatedInput", {}).get("command", "gh api user --jq .login")
    assert "enter.sh" not in ran, ran
