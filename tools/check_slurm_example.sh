#!/bin/bash
# Runs docs/examples/size-slurm.sh on a real Slurm and checks that the merged report equals the
# unsharded search byte for byte (docs/size.md, "Slurm").
#
# Brings up a one-node Slurm on this machine (Debian's slurm-wlm + munge, installed if missing;
# needs root; no systemd, no cgroups: munged, slurmctld and slurmd are started by hand with a
# minimal slurm.conf for localhost, everything under a temporary directory), submits the example
# as written with a small search (TRACE_FLAGS, SHARDS and CPUS below), waits for the array and
# the merge job, runs the same search unsharded, compares all.json and all.csv with it (cmp; the
# JSON's size_id fingerprint included) and tears everything down. Run by hand, not in CI (it
# installs system packages and starts daemons): about 15 s once the packages are there.
#
#   bash tools/check_slurm_example.sh              # uses build/ci/cli/kvsim
#   KVSIM_BUILD=build/release KEEP=1 bash tools/check_slurm_example.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${KVSIM_BUILD:-build/ci}
[ -x "$BUILD/cli/kvsim" ] || { echo "check_slurm_example: no $BUILD/cli/kvsim (build first)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "check_slurm_example: needs root (slurmd, munged)" >&2; exit 2; }
export PATH="$ROOT/$BUILD/cli:$PATH"  # the example calls `kvsim`

if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "check_slurm_example: installing slurm-wlm munge" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

W=$(mktemp -d /tmp/kvsim-slurm.XXXXXX)
chmod 755 "$W"
started=()  # pid files of the daemons started here
cleanup() {
  set +e
  command -v scancel >/dev/null && [ -f "$W/slurm.conf" ] && scancel --user=root >/dev/null 2>&1
  pids=()
  for ((i = ${#started[@]} - 1; i >= 0; i--)); do
    pid=$(cat "${started[i]}" 2>/dev/null) && kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  for _ in $(seq 50); do  # wait until they are gone (up to 10 s)
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  [ "$alive" = 0 ] && echo "stopped munged, slurmctld and slurmd" || echo "still running: ${pids[*]}"
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT

# munge: its own key and socket, so a munged already running is left alone.
mkdir -p "$W/munge"
dd if=/dev/urandom of="$W/munge/munge.key" bs=1024 count=1 status=none
chown -R munge:munge "$W/munge" && chmod 755 "$W/munge" && chmod 400 "$W/munge/munge.key"
runuser -u munge -- munged --key-file="$W/munge/munge.key" --socket="$W/munge/munge.socket" \
  --pid-file="$W/munge/munged.pid" --log-file="$W/munge/munged.log" \
  --seed-file="$W/munge/munged.seed"
started+=("$W/munge/munged.pid")

cpus=$(nproc)
mkdir -p "$W/state" "$W/spool"
cat >"$W/slurm.conf" <<EOF
ClusterName=kvsim-check
SlurmctldHost=localhost
SlurmctldPort=${SLURMCTLD_PORT:-16817}
SlurmdPort=${SLURMD_PORT:-16818}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$W/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$W/state
SlurmdSpoolDir=$W/spool
SlurmctldPidFile=$W/slurmctld.pid
SlurmdPidFile=$W/slurmd.pid
SlurmctldLogFile=$W/slurmctld.log
SlurmdLogFile=$W/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=check Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$W/slurm.conf"
slurmctld -c && started+=("$W/slurmctld.pid")
slurmd -N localhost && started+=("$W/slurmd.pid")
for _ in $(seq 60); do
  state=$(sinfo -h -N -o %t 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 1
done
[ "$state" = idle ] || { echo "check_slurm_example: the node did not come up ($state)" >&2; tail "$W"/*.log >&2; exit 1; }
echo "slurm: $(sinfo --version), node localhost with $cpus CPUs idle"

# The example, as written, on a search small enough for this machine.
export OUT="$W/out" SHARDS=${SHARDS:-4} CPUS=${CPUS:-1}
export TRACE_FLAGS=${TRACE_FLAGS:---max-requests 2000 --time-scale 0.25}
submit=$(bash docs/examples/size-slurm.sh)
echo "$submit"
array_job=$(sed -n 's/^submitted array job \([0-9]*\).*/\1/p' <<<"$submit")
merge_job=$(sed -n 's/^submitted merge job \([0-9]*\).*/\1/p' <<<"$submit")
start=$SECONDS
while squeue -h -j "$array_job,$merge_job" 2>/dev/null | grep -q .; do
  ((SECONDS - start < ${TIMEOUT_S:-900})) || { echo "check_slurm_example: jobs still queued after ${TIMEOUT_S:-900} s" >&2; squeue >&2; exit 1; }
  sleep 2
done
echo "jobs done in $((SECONDS - start)) s:"
scontrol -o show job "$array_job" | sed -n 's/.*\(JobId=[0-9]*\).*\(ArrayTaskId=[0-9]*\).*\(JobState=[A-Z]*\).*\(ExitCode=[0-9:]*\).*/  \1 \2 \3 \4/p'
scontrol -o show job "$merge_job" | sed -n 's/.*\(JobId=[0-9]*\).*\(JobName=[^ ]*\).*\(JobState=[A-Z]*\).*\(ExitCode=[0-9:]*\).*/  \1 \2 \3 \4/p'
ls "$OUT"
echo "--- merge.log (the merged table; the whole of it in all.csv)"
head -6 "$OUT/merge.log" && echo "   ..." && tail -2 "$OUT/merge.log"
[ -s "$OUT/all.json" ] && [ -s "$OUT/all.csv" ] || { echo "check_slurm_example: the merge wrote no report" >&2; tail "$OUT"/*.log >&2; exit 1; }

# The same search, unsharded, in this shell.
echo "--- the same search unsharded"
eval "kvsim size $(cat "$OUT/search.args") --jobs $cpus --quiet --json $W/unsharded.json --csv $W/unsharded.csv" 2>&1 | tail -1
fail=0
for f in json csv; do
  if cmp "$OUT/all.$f" "$W/unsharded.$f"; then
    echo "all.$f == unsharded.$f ($(wc -c <"$OUT/all.$f") bytes, byte for byte)"
  else
    echo "all.$f differs from unsharded.$f" && diff "$OUT/all.$f" "$W/unsharded.$f" | head -20
    fail=1
  fi
done
grep -o '"size_id": *"[^"]*"' "$OUT/all.json" "$W/unsharded.json" | sed "s|$W/||"
if [ "$fail" = 0 ]; then echo "check_slurm_example: OK"; else echo "check_slurm_example: FAILED"; fi
exit "$fail"
