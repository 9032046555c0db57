#!/usr/bin/env bash
# Build the PKB images with podman on this machine and check them end to end: the site image
# against the machine's PostgreSQL and Redis, a CPU worker image on the CPU hardware's queue, one
# file submitted through the API and judged inside the worker container's sandbox.
#
#   scripts/container/build_and_run.sh               # base image (once), build, run, submit, verdict
#   scripts/container/build_and_run.sh --build-only  # base image and the two images
#   scripts/container/build_and_run.sh --rebuild-base
#
# Needs root, podman, runc, mmdebstrap (apt-get install podman runc mmdebstrap), PostgreSQL on
# 127.0.0.1:5432 (trust) and Redis on 127.0.0.1:6379. No registry is reached: the base image is a
# Debian bookworm made here with mmdebstrap; pip reaches PyPI and takes torch from PKB_WHEELS.
# What the worker container must be allowed, and why: docs/portal.md#container-images.
set -euo pipefail
cd "$(dirname "$0")/../.."

TAG=${PKB_IMAGE_TAG:-dev}
BASE_IMAGE=localhost/pkb-base:bookworm-py311
SITE_IMAGE=localhost/pkb-site:$TAG
WORKER_IMAGE=localhost/pkb-worker:$TAG
WHEELS=${PKB_WHEELS:-/opt/wheels}              # holds torch-2.13.0+cpu-*.whl; else PyTorch's index
STATE=var/container                            # git-ignored: the seccomp profile, logs
PORT=${PKB_CONTAINER_PORT:-18025}
DB=${PKB_CONTAINER_DB:-pkb_container}
REDIS_URL=${PKB_CONTAINER_REDIS:-redis://127.0.0.1:6379/13}
HARDWARE=cpu-gloo-amd-epyc-2c                  # hardware/<id>.json; its queue is pkb.hw.<id>
SOLUTION=solutions/broken/cpu_correct.py       # a correct all-reduce: the verdict must be pass
SITE=pkb-check-site WORKER=pkb-check-worker REFUSAL=pkb-check-refusal

BUILD_ONLY=0 REBUILD_BASE=0
for arg in "$@"; do
  case $arg in
    --build-only) BUILD_ONLY=1 ;;
    --rebuild-base) REBUILD_BASE=1 ;;
    *) echo "unknown option $arg (use --build-only, --rebuild-base)" >&2; exit 2 ;;
  esac
done

say() { printf '== %s  %s\n' "$(date -u +%H:%M:%S)" "$*"; }
die() { printf 'build_and_run: %s\n' "$*" >&2; exit 1; }
seconds_since() { echo $(( $(date +%s) - $1 )); }

[ "$(id -u)" = 0 ] || die "run it as root: podman builds and runs rootful here"
for tool in podman mmdebstrap python3; do
  command -v "$tool" >/dev/null || die "$tool is missing: apt-get install podman runc mmdebstrap"
done
mkdir -p "$STATE"

# crun (podman's default runtime on bookworm) refuses a host with cgroup v1 controllers mounted
# ("cgroups in hybrid mode not supported"); runc runs there.
RUNTIME=()
if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
  command -v runc >/dev/null || die "this host has cgroup v1: apt-get install runc"
  RUNTIME=(--runtime runc)
fi
# podman raises nofile and nproc to 1048576 by default; a root without CAP_SYS_RESOURCE (this
# machine) cannot, so the containers get the host's open-file limit and a process limit within it.
LIMITS=(--ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096)

make_base() {
  if [ "$REBUILD_BASE" = 0 ] && podman image exists "$BASE_IMAGE"; then
    say "base image $BASE_IMAGE exists (--rebuild-base makes it again)"; return
  fi
  local started tar=$STATE/base.tar
  started=$(date +%s)
  say "making $BASE_IMAGE with mmdebstrap (Debian bookworm, python3.11)"
  mmdebstrap --quiet --variant=apt --include=python3,python3.11-venv,ca-certificates,passwd,tzdata \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    bookworm "$tar"
  podman import --quiet --change 'CMD ["python3"]' "$tar" "$BASE_IMAGE" >/dev/null
  rm -f "$tar"
  say "base image made in $(seconds_since "$started") s"
}

build_target() {  # target image
  local started torch=() ca=()
  started=$(date +%s)
  if compgen -G "$WHEELS/torch-2.13.0+cpu-*.whl" >/dev/null; then
    torch=(--build-arg TORCH_INDEX_URL= --build-arg PIP_FIND_LINKS=/wheels -v "$(realpath "$WHEELS")":/wheels:ro)
  fi
  if [ -n "${PIP_CERT:-}" ]; then  # a network that inspects TLS: pip inside needs its CA too
    ca=(--build-arg PIP_CERT=/run/pkb-build-ca.crt -v "$(realpath "$PIP_CERT")":/run/pkb-build-ca.crt:ro)
  fi
  say "building $2 (target $1)"
  # --format docker keeps HEALTHCHECK (the OCI image format has no such field).
  podman build "${RUNTIME[@]}" "${LIMITS[@]}" --network host --format docker --layers \
    --build-arg BASE="$BASE_IMAGE" "${torch[@]}" "${ca[@]}" --target "$1" -t "$2" . \
    > "$STATE/build-$1.log" 2>&1 || { tail -30 "$STATE/build-$1.log"; die "building $1 failed (log: $STATE/build-$1.log)"; }
  say "built $2 in $(seconds_since "$started") s ($(grep -c 'Using cache' "$STATE/build-$1.log") steps from the layer cache)"
}

report_sizes() {
  local image
  for image in "$BASE_IMAGE" "$SITE_IMAGE" "$WORKER_IMAGE"; do
    printf '   %-36s %s\n' "$image" "$(podman image inspect -f '{{.Size}}' "$image" | awk '{printf "%.0f MB", $1/1e6}')"
  done
}

cleanup() {
  local name
  for name in $SITE $WORKER $REFUSAL; do
    podman rm -f -t 5 "$name" >/dev/null 2>&1 || true
  done
}

# The worker's sandbox makes user, mount, PID and network namespaces inside the container. Three
# of podman's defaults stop it: the masked /proc paths (the kernel refuses a fresh /proc over a
# /proc with hidden parts), the seccomp rule that allows sethostname only with CAP_SYS_ADMIN, and
# the missing CAP_SYS_PTRACE: the evaluator reads a side's outputs through /proc/<init>/root, and
# the side's init is not dumpable, which a non-root evaluator may read only with that capability
# (without it every evaluation fails: "the outputs of timed calls [...] were expected, found []").
# The container runs as the image's non-root user; podman makes the capability ambient for it.
sandbox_options() {
  python3 scripts/container/seccomp_profile.py /usr/share/containers/seccomp.json "$STATE/seccomp.json"
  SANDBOX=(--security-opt 'unmask=/proc/*' --security-opt "seccomp=$STATE/seccomp.json" --cap-add SYS_PTRACE)
}

check_refusal() {
  say "a worker started with podman's defaults must refuse to start (no sandbox there)"
  local log=$STATE/refusal.log
  timeout 120 podman run "${RUNTIME[@]}" "${LIMITS[@]}" --rm --name $REFUSAL --network host \
    -e PKB_WORKER_HARDWARE=$HARDWARE -e PKB_BROKER_URL="$REDIS_URL" "$WORKER_IMAGE" >"$log" 2>&1 \
    && die "the worker started without a sandbox (log: $log)"
  grep -q "cannot confine candidate code" "$log" \
    || { tail -20 "$log"; die "the worker stopped, but not with the sandbox's reason (log: $log)"; }
  say "refused: $(grep -o 'this host cannot confine[^;]*' "$log" | head -1)"
}

wait_healthy() {  # container seconds
  local deadline=$(( $(date +%s) + $2 ))
  until podman healthcheck run "$1" >/dev/null 2>&1; do
    [ "$(podman inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" = true ] \
      || { podman logs --tail 40 "$1"; die "$1 exited"; }
    [ "$(date +%s)" -lt "$deadline" ] || { podman logs --tail 40 "$1"; die "$1 not healthy after $2 s"; }
    sleep 3
  done
}

run_site() {
  pg_isready -q -h 127.0.0.1 -p 5432 || die "PostgreSQL is not answering on 127.0.0.1:5432"
  redis-cli -u "$REDIS_URL" ping >/dev/null || die "Redis is not answering at $REDIS_URL"
  dropdb --if-exists -h 127.0.0.1 -U postgres "$DB" && createdb -h 127.0.0.1 -U postgres "$DB"
  local started
  started=$(date +%s)
  say "starting $SITE_IMAGE on port $PORT (database $DB, broker $REDIS_URL)"
  podman run "${RUNTIME[@]}" "${LIMITS[@]}" -d --name $SITE --network host \
    -e PKB_SECRET_KEY="$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')" \
    -e DATABASE_URL="postgres://postgres@127.0.0.1:5432/$DB" -e PKB_BROKER_URL="$REDIS_URL" \
    -e PKB_HTTPS=0 -e PKB_PORT="$PORT" -e PKB_GUNICORN_WORKERS=2 \
    -e PKB_CALLBACK_BASE_URL="http://127.0.0.1:$PORT" "$SITE_IMAGE" >/dev/null
  wait_healthy $SITE 600
  say "site healthy (migrated, seeded, serving) $(seconds_since "$started") s after start"
}

run_worker() {
  say "starting $WORKER_IMAGE on pkb.hw.$HARDWARE, sandbox on"
  podman run "${RUNTIME[@]}" "${LIMITS[@]}" "${SANDBOX[@]}" -d --name $WORKER --network host \
    --hostname pkb-worker-cpu -e PKB_WORKER_HARDWARE=$HARDWARE -e PKB_BROKER_URL="$REDIS_URL" \
    -e PKB_PORTAL_URL="http://127.0.0.1:$PORT" "$WORKER_IMAGE" >/dev/null
  wait_healthy $WORKER 180
  say "worker healthy (answers celery ping)"
}

submit() {
  local password started
  password=$(python3 -c 'import secrets; print(secrets.token_urlsafe(16))')
  podman exec $SITE python manage.py shell -c \
    "from django.contrib.auth.models import User; User.objects.create_user('container-check', password='$password')"
  started=$(date +%s)
  say "submitting $SOLUTION through the API"
  python3 scripts/container/submit_and_wait.py "http://127.0.0.1:$PORT" container-check "$password" \
    all-reduce $HARDWARE $SOLUTION 900 \
    || { podman logs --tail 60 $WORKER; die "no passing verdict from the containers"; }
  say "verdict in $(seconds_since "$started") s"
}

total=$(date +%s)
make_base
build_target worker "$WORKER_IMAGE"
build_target site "$SITE_IMAGE"
say "image sizes (podman image inspect; the site and worker share every layer up to the code):"
report_sizes
if [ "$BUILD_ONLY" = 1 ]; then say "done in $(seconds_since "$total") s"; exit 0; fi

trap cleanup EXIT
cleanup
sandbox_options
check_refusal
run_site
run_worker
submit
say "done in $(seconds_since "$total") s"
