#!/usr/bin/env bash
# Creates .venv-bench: chDB (the ClickHouse engine as a Python library) for `make bench`, which
# times ClickHouse beside dq on the same rows (cli/dqbench/chdb_engine.py). Every package is
# pinned with its SHA-256 in scripts/bench-tools.lock and installed with `pip --require-hashes`.
#
# Usage: scripts/bench-venv.sh
#
# Idempotent: a stamp in the venv records the lock's SHA-256; when it matches and chdb imports,
# nothing is done.
#
# Environment:
#   DQ_BENCH_VENV  venv directory (default: .venv-bench at the repository root)
#   PYTHON         interpreter used to create the venv (default: python3)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
lock="$repo_root/scripts/bench-tools.lock"
venv="${DQ_BENCH_VENV:-$repo_root/.venv-bench}"
python="${PYTHON:-python3}"
stamp="$venv/.dq-bench-stamp"
want="$(sha256sum "$lock" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && "$venv/bin/python" -c 'import chdb' 2>/dev/null; then
    echo "bench-venv.sh: $venv already has chdb from $(basename "$lock")"
    exit 0
fi
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf "$venv"
    echo "bench-venv.sh: creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
fi
rm -f "$stamp"
echo "bench-venv.sh: installing $(grep -cE '^[A-Za-z0-9].*==' "$lock") hash-pinned packages (chdb) into $venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    --require-hashes -r "$lock"
"$venv/bin/python" -c 'import chdb; print("bench-venv.sh: chdb", chdb.__version__, "ClickHouse", chdb.engine_version)'
printf '%s' "$want" >"$stamp"
