#!/usr/bin/env bash
# Lints template.yaml offline:
#   1. cfn-lint template.yaml                         (CloudFormation + SAM rules)
#   2. sam validate --lint --template template.yaml   (SAM CLI's cfn-lint run)
#   3. sam validate --template template.yaml          (the SAM transform itself)
# Neither needs the network or AWS credentials; sam validate only needs a
# region, so one is set here (AWS_REGION, default us-east-1).
#
# The linters live in their own venv (LINT_VENV, default .venv-lint/ at the
# repo root, ignored by git), made from infra/requirements-lint.txt with
# PYTHON (default python3, 3.11 is what the pins were checked on) and
# remade whenever that file changes.
#
# Usage: infra/lint.sh [template]     (from anywhere; default template.yaml)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

template="${1:-template.yaml}"
venv="${LINT_VENV:-.venv-lint}"
python="${PYTHON:-python3}"
req="infra/requirements-lint.txt"
stamp="$venv/.requirements-lint.txt"

if ! cmp -s "$req" "$stamp" 2>/dev/null; then
    echo "lint: creating $venv from $req" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req"
    cp "$req" "$stamp"
fi

export AWS_REGION="${AWS_REGION:-us-east-1}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-$AWS_REGION}"
export SAM_CLI_TELEMETRY=0

echo "lint: cfn-lint $template" >&2
"$venv/bin/cfn-lint" -- "$template"

echo "lint: sam validate --lint --template $template" >&2
"$venv/bin/sam" validate --lint --template "$template"

echo "lint: sam validate --template $template" >&2
"$venv/bin/sam" validate --template "$template"

echo "lint: $template passed" >&2
