#!/usr/bin/env bash
# Fills .whl/ with the wheels a GPU host lacks for the portal and the worker (scripts/wheelhouse.sh
# installs them there): cp312 manylinux wheels of the portal's packages and their dependencies,
# less those the hosts' image already holds (/work/.library/device/KINDS.md's package list, read
# 2026-11-17), since a carried copy would shadow the host's own. Run where pip reaches PyPI:
#
#   scripts/gpu_wheelhouse.sh [DIR]        # DIR: .whl (default)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
ON_THE_HOST='attrs click narwhals packaging pygments python_dateutil pyyaml six typing_extensions'
ALL=$(mktemp -d)
trap 'rm -rf "$ALL"' EXIT
# The versions this project is tested with here, where the ranges allow them (pyproject.toml).
"$PY" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$ALL" "django==5.2.19" "djangorestframework>=3.15" "drf-spectacular>=0.28" \
  "drf-spectacular-sidecar>=2024.7" "celery>=5.4" "gunicorn>=22" "whitenoise>=6.7" "pygments>=2.18" \
  "plotly>=5.24" "dj-database-url>=2.2" "jsonschema>=4.23"
mkdir -p "$DEST"
for wheel in "$ALL"/*.whl; do
  name=$(basename "$wheel"); name=${name%%-*}
  case " $ON_THE_HOST " in *" ${name,,} "*) continue ;; esac
  cp "$wheel" "$DEST"/
done
du -sh "$DEST"; ls "$DEST"
