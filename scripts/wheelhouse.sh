# Sourced, not run. A GPU host has python3 with torch and nothing else of ours: the portal's and
# the worker's packages come from the wheelhouse .whl/ (prepared with scripts/gpu_wheelhouse.sh),
# installed into a directory that goes first on PYTHONPATH.
#
#   use_wheelhouse PYTHON MODULE...   makes each MODULE importable by PYTHON, or says why not (status 1)

use_wheelhouse() {
  local py=$1; shift
  local probe root site=${PKB_WHEEL_SITE:-/tmp/pkb-site}
  probe="import $(IFS=,; echo "$*")"
  "$py" -c "$probe" 2>/dev/null && return 0
  root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  if ! PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH} "$py" -c "$probe" 2>/dev/null; then
    if ! ls "$root"/.whl/*.whl >/dev/null 2>&1; then
      echo "$py lacks $* and $root/.whl/ holds no wheels: run scripts/gpu_wheelhouse.sh where pip" \
           "reaches PyPI and bring .whl/ along (docs/portal.md, 'A GPU host')" >&2
      return 1
    fi
    echo "installing $(ls "$root"/.whl/*.whl | wc -l) wheels from .whl/ into $site" >&2
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$root"/.whl/*.whl || return 1
  fi
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  "$py" -c "$probe" || { echo "the wheelhouse in $root/.whl/ does not give $py all of: $*" >&2; return 1; }
}
