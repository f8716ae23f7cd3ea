#!/usr/bin/env bash
# Jobs that span several hosts, on one machine: every host is a network namespace with its own
# /dev/shm (capi-tests/hosts/netns.sh), joined to the others only by a bridge. README.md here
# says what is built and how to run one case by hand.
#
#   bash capi-tests/hosts/run.sh [lib-dir]        (default target/release; needs root)
#
# Ranks are the project's own workers, one rank per process: `opennrt perf-rank` (the hidden
# worker of `opennrt perf --procs`, every element checked; exit 1 = wrong elements, 3 = a
# runtime error) and, for the NEFF path (nrt_load_collectives + nrt_execute per process),
# nccom-test's `__worker`. Process p of a case runs on host p / (processes per host), owns
# logical core p (NEURON_RT_VISIBLE_CORES=p, so its global rank is p) and bootstraps through
# NEURON_RT_ROOT_COMM_ID=10.231.0.1:<port> (host 0 holds rank 0, the root). Process 0 gets
# --wait-stdin, and its stdin is closed once every other process has exited, as
# src/launch.rs does.
#
# Environment:
#   OPENNRT_TEST_STRICT=1        no root / no netns support fails instead of skipping
#   OPENNRT_HOSTS_CASES=REGEX    run only the cases whose name matches (e.g. '^2x1-all_reduce')
#   OPENNRT_HOSTS_TIMEOUT=120    seconds per process
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
strict="${OPENNRT_TEST_STRICT:-0}"
only="${OPENNRT_HOSTS_CASES:-}"
per_proc_timeout="${OPENNRT_HOSTS_TIMEOUT:-120}"

# shellcheck source=capi-tests/hosts/netns.sh
source "$here/netns.sh"

skip() {
  if [ "$strict" = 1 ]; then
    echo "hosts: FAILED: cannot run the multi-host tests: $* (OPENNRT_TEST_STRICT=1)" >&2
    exit 1
  fi
  echo "hosts: SKIPPED: $*"
  exit 0
}
why="$(hosts_unsupported)"
[ -z "$why" ] || skip "$why"
for f in opennrt nccom-test libncfw.so; do
  [ -e "$lib/$f" ] || { echo "hosts: $lib/$f is missing (cargo build --release --workspace)" >&2; exit 1; }
done
command -v python3 >/dev/null || skip "python3 is not installed (the NEFF case reads nccom-test's job with it)"

# What the run must not leave behind in the root namespace's /dev/shm.
shm_before="$(ls /dev/shm | grep '^opennrt-' | sort || true)"
work="$(mktemp -d "${TMPDIR:-/tmp}/opennrt-hosts.XXXXXX")"

# The EXIT trap: remove every namespace (also on failure), then check nothing is left.
finish() {
  local rc=$? leaked=0
  trap - EXIT INT TERM
  hosts_down_checked hosts "$shm_before" || leaked=1
  rm -rf "$work"
  if [ "$leaked" = 1 ] && [ "$rc" = 0 ]; then rc=1; fi
  if [ "$rc" = 0 ]; then echo "hosts: cleanup checked: no namespace of ours, nothing new in /dev/shm"; fi
  exit "$rc"
}

max_hosts=8
echo "+ hosts_up $max_hosts   (namespaces ${HOSTS_PREFIX}h0..h$((max_hosts - 1)), bridge ${HOSTS_BR})"
hosts_up "$max_hosts"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the hosts themselves: one /dev/shm each, shared by the processes of one host
host_exec 0 sh -c 'echo probe > /dev/shm/onrt-hosts-probe'
host_exec 0 test -e /dev/shm/onrt-hosts-probe \
  || { echo "hosts: FAILED: host 0's processes do not share its /dev/shm" >&2; exit 1; }
if host_exec 1 test -e /dev/shm/onrt-hosts-probe || [ -e /dev/shm/onrt-hosts-probe ]; then
  echo "hosts: FAILED: a file in host 0's /dev/shm is visible on host 1 or in the root namespace" >&2
  exit 1
fi
host_exec 0 rm -f /dev/shm/onrt-hosts-probe
host_exec 1 timeout 10 python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 7)); s.listen(); s.settimeout(8); s.accept()' \
  "$(host_addr 1)" &
listener=$!
sleep 0.3
host_exec 0 timeout 10 python3 -c '
import socket, sys, time
for _ in range(50):
    try: socket.create_connection((sys.argv[1], 7), timeout=1); break
    except OSError: time.sleep(0.1)
else: sys.exit("host 0 cannot reach host 1")' "$(host_addr 1)"
wait "$listener"
echo "ok   hosts: $max_hosts namespaces; /dev/shm private to each host and shared within one; host 0 reaches host 1 over TCP"

# ---- cases
passed=0 failed=0 skipped=0 port=31000
failures=()

# show_stderr DIR NPROCS: every process's stderr (and stdout when it is not a report).
show_stderr() {
  local d="$1" n="$2" p
  for ((p = 0; p < n; p++)); do
    echo "---- process $p (host $(cat "$d/host$p")) exit $(cat "$d/rc$p" 2>/dev/null || echo '?'): stderr" >&2
    sed 's/^/    /' "$d/err$p" >&2 || true
    [ -s "$d/out$p" ] && sed 's/^/    stdout: /' "$d/out$p" | cut -c1-300 >&2
  done
}

# judge NAME DIR NPROCS MULTIHOST CHECK_FN: pass or fail, and print it.
judge() {
  local name="$1" d="$2" n="$3" multi="$4" check="$5" p ok=1 why=""
  for ((p = 0; p < n; p++)); do
    if [ "$(cat "$d/rc$p")" != 0 ]; then ok=0; why="process $p exited with $(cat "$d/rc$p")"; break; fi
  done
  if [ "$ok" = 1 ] && ! why="$("$check" "$d" "$n")"; then ok=0; fi
  if [ "$ok" = 1 ]; then
    echo "ok   $name"
    passed=$((passed + 1))
  else
    echo "FAIL $name: $why" >&2
    show_stderr "$d" "$n"
    failed=$((failed + 1)); failures+=("$name")
  fi
}

# launch DIR NPROCS PER_HOST CMD_FN: start process p on host p / PER_HOST with the launcher
# environment (CMD_FN p prints its command, one word a line), wait for all, record exits.
launch() {
  local d="$1" n="$2" per="$3" cmd_fn="$4" p h pids=() fifo="$1/stdin0"
  local rootid
  port=$((port + 1))
  rootid="$(host_addr 0):$port"
  mkfifo "$fifo"
  exec {hold}<>"$fifo"   # the write end of process 0's stdin, closed when the others are done
  for ((p = 0; p < n; p++)); do
    h=$((p / per))
    echo "$h" > "$d/host$p"
    mapfile -t argv < <("$cmd_fn" "$p")
    if [ "$p" = 0 ]; then
      NEURON_RT_VISIBLE_CORES="$p" NEURON_RT_ROOT_COMM_ID="$rootid" NEURON_RT_EXEC_TIMEOUT=60 \
        OPENNRT_NCFW_PATH="$lib/libncfw.so" \
        host_exec "$h" timeout -k 5 "$per_proc_timeout" "${argv[@]}" \
        < "$fifo" > "$d/out$p" 2> "$d/err$p" {hold}>&- &
    else
      NEURON_RT_VISIBLE_CORES="$p" NEURON_RT_ROOT_COMM_ID="$rootid" NEURON_RT_EXEC_TIMEOUT=60 \
        OPENNRT_NCFW_PATH="$lib/libncfw.so" \
        host_exec "$h" timeout -k 5 "$per_proc_timeout" "${argv[@]}" \
        < /dev/null > "$d/out$p" 2> "$d/err$p" {hold}>&- &
    fi
    pids+=($!)
  done
  local rc
  for ((p = 1; p < n; p++)); do
    rc=0; wait "${pids[$p]}" || rc=$?
    echo "$rc" > "$d/rc$p"
  done
  exec {hold}>&-
  rc=0; wait "${pids[0]}" || rc=$?
  echo "$rc" > "$d/rc0"
}

# -- perf-rank cases
small=256          # fp32 elements per rank: 1 KiB
big=262144         # 1 MiB
PR_OP="" PR_N=0
perf_rank_cmd() {
  local p="$1"
  printf '%s\n' "$lib/opennrt" perf-rank --op "$PR_OP" --ranks "$PR_N" --procs "$PR_N" \
    --proc "$p" --dtype fp32 --redop add --counts "$small,$big" --iters "${PR_ITERS:-1}" --check 1
  if [ "$p" = 0 ]; then echo --wait-stdin; fi
}
# Every process reported both sizes with 0 wrong elements.
perf_rank_check() {
  local d="$1" n="$2" p c
  for ((p = 0; p < n; p++)); do
    for c in "$small" "$big"; do
      if ! grep -qE "\"count\":$c,.*\"wrong\":0[,}]" "$d/out$p"; then
        echo "process $p has no report with 0 wrong elements for count $c"
        return 1
      fi
    done
  done
}

perf_rank_case() {
  local hosts="$1" per="$2" op="$3" name d multi=1
  name="${hosts}x${per}-$op"
  if [ "$hosts" = 1 ]; then multi=0; name="1x${per}-$op (one host: control)"; fi
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/${hosts}x${per}-$op"
  mkdir -p "$d"
  PR_OP="$op" PR_N=$((hosts * per))
  launch "$d" "$PR_N" "$per" perf_rank_cmd
  judge "$name: opennrt perf-rank, $PR_N ranks, fp32 $((small * 4)) B and $((big * 4)) B" "$d" "$PR_N" "$multi" perf_rank_check
}

echo "# perf-rank: one rank per process; process p on host p / ranks-per-host; root $(host_addr 0)"
for op in all_reduce all_gather reduce_scatter; do
  perf_rank_case 1 2 "$op"
  perf_rank_case 2 1 "$op"
  perf_rank_case 2 2 "$op"
  perf_rank_case 4 1 "$op"
done

# -- multi-node lowering across hosts: OPENNRT_TOPOLOGY names a shape whose nodes are the hosts
# (node-major, as the ranks are numbered), so the selection takes the inter-node algorithms,
# and their legs between nodes cross the network. The log must name the algorithm.
TOPO_EXPECT=""
topo_check() {
  perf_rank_check "$@" || return 1
  grep -q "chose $TOPO_EXPECT" "$1/err0" \
    || { echo "process 0's log does not say 'chose $TOPO_EXPECT'"; grep -h "chose" "$1/err0" | head -3; return 1; }
  if [ "$TOPO_JOB" = 1 ] && ! grep -q "(the hosts as nodes)" "$1/err0"; then
    echo "process 0's log does not say the topology came from the job's hosts"; return 1
  fi
}
TOPO_JOB=0
topo_case() {
  local hosts="$1" per="$2" op="$3" topo="$4" expect="$5" forced="${6:-}" name d
  name="${hosts}x${per}-$op-$expect: OPENNRT_TOPOLOGY=$topo${forced:+ OPENNRT_CC_ALGO=$forced}"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/topo-${hosts}x${per}-$op-$expect-${topo%%:*}"
  mkdir -p "$d"
  PR_OP="$op" PR_N=$((hosts * per)) TOPO_EXPECT="$expect"
  # "job", or no variable at all ("unset"): the runtime derives the shape from the job's hosts.
  TOPO_JOB=0
  [ "$topo" = job ] || [ "$topo" = unset ] && TOPO_JOB=1
  if [ "$topo" = unset ]; then
    OPENNRT_CC_ALGO="$forced" NEURON_RT_LOG_LEVEL=INFO launch "$d" "$PR_N" "$per" perf_rank_cmd
  else
    OPENNRT_TOPOLOGY="$topo" OPENNRT_CC_ALGO="$forced" NEURON_RT_LOG_LEVEL=INFO \
      launch "$d" "$PR_N" "$per" perf_rank_cmd
  fi
  judge "$name: $PR_N ranks, fp32 $((small * 4)) B and $((big * 4)) B" "$d" "$PR_N" 1 topo_check
}
# -- an algorithm forced for one node that the hosts' topology refuses (intra RDH needs one
# node): every rank keeps the program it prepared, says so, and the result is still exact.
fallback_check() {
  perf_rank_check "$@" || return 1
  grep -q "not lowered again for the job's hosts" "$1/err0" \
    || { echo "process 0's log does not say the collective kept its one-node program"; return 1; }
}
fallback_case() {
  local name="2x2-all_reduce-forced-intra_rdh: OPENNRT_CC_ALGO=intra_rdh, which the hosts' topology refuses" d
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/fallback-2x2"
  mkdir -p "$d"
  PR_OP=all_reduce PR_N=4
  OPENNRT_CC_ALGO=intra_rdh OPENNRT_CC_RDH=1 NEURON_RT_LOG_LEVEL=WARNING \
    launch "$d" 4 2 perf_rank_cmd
  judge "$name" "$d" 4 1 fallback_check
}
echo "# a forced one-node algorithm across hosts"
fallback_case

# -- repeats: from a group's second run of the same collective on, the ranks meet without the
# root (src/runtime/multi_process/run.rs, "Repeats across hosts"): the proxy holds what a
# peer on another host sends early, and the ranks of one host wait for each other's armed
# segments. 30 runs in a row, each rank's log must show such a go, and the result is exact.
repeat_check() {
  local d="$1" n="$2" p
  perf_rank_check "$@" || return 1
  for ((p = 0; p < n; p++)); do
    grep -q "go (armed)" "$d/err$p" \
      || { echo "process $p's log shows no repeat that met without the root ('go (armed)')"; return 1; }
  done
}
repeat_case() {
  local hosts="$1" per="$2" op="$3" name d
  name="${hosts}x${per}-$op-repeats: 30 runs, each after the first meets without the root"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/repeat-${hosts}x${per}-$op"
  mkdir -p "$d"
  PR_OP="$op" PR_N=$((hosts * per))
  PR_ITERS=30 NEURON_RT_LOG_LEVEL=DEBUG launch "$d" "$PR_N" "$per" perf_rank_cmd
  judge "$name" "$d" "$PR_N" 1 repeat_check
}
echo "# repeats across hosts"
repeat_case 2 1 all_reduce
repeat_case 2 2 all_gather

echo "# multi-node lowering: the hosts are the topology's nodes"
topo_case 2 2 all_reduce custom:2x2x1:gen=v2:fabric=switch hier
topo_case 2 2 all_gather custom:2x2x1:gen=v2:fabric=switch hier
topo_case 2 2 reduce_scatter custom:2x2x1:gen=v2:fabric=switch hier
topo_case 4 1 all_reduce custom:4x1x1:gen=v2:fabric=switch single_cycle_ring
topo_case 8 1 all_reduce custom:8x1x1:gen=v2:fabric=switch inter_rdh inter_rdh
# OPENNRT_TOPOLOGY=job: the runtime derives the shape from where the job's ranks live.
topo_case 2 2 all_reduce job hier
topo_case 4 1 all_reduce job single_cycle_ring
# No variable: a collective of the whole world learns the hosts from its first go answer and,
# when their topology lowers it otherwise, is lowered again and met again.
topo_case 2 2 all_reduce unset hier
topo_case 2 2 all_gather unset hier
topo_case 4 1 all_reduce unset single_cycle_ring

# -- the NEFF path: nccom-test's worker, nrt_load_collectives + nrt_execute in each process.
# nccom-test --debug, run once on the loopback of host 0, writes the NEFF and prints each
# worker's job; the same jobs then run one per host.
NEFF_JOBS=()
neff_cmd() { printf '%s\n' "$lib/nccom-test" __worker "${NEFF_JOBS[$1]}"; }
# every_out DIR N PATTERN WHAT: every process's stdout matches PATTERN (ERE; {p} stands for
# the process's number), or say which one does not have WHAT.
every_out() {
  local d="$1" n="$2" pattern="$3" what="$4" p
  for ((p = 0; p < n; p++)); do
    grep -qE "${pattern//\{p\}/$p}" "$d/out$p" || { echo "process $p has no $what"; return 1; }
  done
}
neff_check() { every_out "$1" "$2" '"rank":{p},.*"wrong":0[,}]' "report with 0 wrong elements"; }
neff_case() {
  local hosts="$1" name d multi=1 j
  name="${hosts}x1-neff-all_reduce"
  if [ "$hosts" = 1 ]; then multi=0; name="1x2-neff-all_reduce (one host: control)"; fi
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/neff-$hosts"
  mkdir -p "$d/tmp"
  host_exec 0 env TMPDIR="$d/tmp" timeout 120 "$lib/nccom-test" -r 2 allr -b 1M -e 1M -d fp32 \
    -n 2 -w 1 --check random --debug > "$d/gen.out" 2> "$d/gen.err" || {
    echo "FAIL $name: nccom-test could not make the NEFF" >&2
    cat "$d/gen.out" "$d/gen.err" >&2
    failed=$((failed + 1)); failures+=("$name"); return 0
  }
  mapfile -t NEFF_JOBS < <(python3 -c '
import json, sys
dec = json.JSONDecoder()
for line in open(sys.argv[1]):
    at = line.find("\"__worker\" ")
    if at >= 0:
        quoted, _ = dec.raw_decode(line[at + len("\"__worker\" "):])
        print(json.dumps(json.loads(quoted), separators=(",", ":")))' "$d/gen.err")
  if [ "${#NEFF_JOBS[@]}" != 2 ]; then
    echo "FAIL $name: nccom-test --debug printed ${#NEFF_JOBS[@]} worker jobs, not 2" >&2
    cat "$d/gen.err" >&2
    failed=$((failed + 1)); failures+=("$name"); return 0
  fi
  for j in "${NEFF_JOBS[@]}"; do
    [ -f "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["neff"])' "$j")" ] \
      || { echo "FAIL $name: the job's NEFF is missing" >&2; failed=$((failed + 1)); failures+=("$name"); return 0; }
  done
  launch "$d" 2 $((2 / hosts)) neff_cmd
  judge "$name: nccom-test __worker (nrt_load_collectives + nrt_execute), 2 ranks, fp32 1 MiB" "$d" 2 "$multi" neff_check
}
# -- host collectives: nrt_barrier and nrt_all_gather from C (host_ag.c), whose data has no
# shared memory to go through when a rank's host is not the root's.
AG_N=0
host_ag_cmd() { printf '%s\n' "$work/host_ag" "$1" "$AG_N" 20 1000; }
host_ag_check() { every_out "$1" "$2" "20 rounds of 1000 bytes per rank exact" "report of 20 exact rounds"; }
host_ag_case() {
  local hosts="$1" per="$2" name d
  name="${hosts}x${per}-host-all_gather: nrt_barrier + 20 nrt_all_gather of 1000 B per rank from C, checked"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/host-ag-${hosts}x${per}"
  mkdir -p "$d"
  AG_N=$((hosts * per))
  launch "$d" "$AG_N" "$per" host_ag_cmd
  judge "$name" "$d" "$AG_N" 1 host_ag_check
}
echo "# host collectives across hosts (capi-tests/hosts/host_ag.c)"
cc -std=c11 -Wall -Wextra -Werror -I"$root/include" -o "$work/host_ag" "$here/host_ag.c" \
  -L"$lib" -lnrt -Wl,-rpath,"$lib"
host_ag_case 2 1
host_ag_case 2 2

echo "# NEFF: nrt_load_collectives + nrt_execute in every process (nccom-test's worker)"
neff_case 1
neff_case 2

# -- nccom-test --hosts: nccom-test itself starts one process per rank through Open MPI's
# mpirun (src/bin/nccom-test/mpi.rs), which runs inside host 0 (it treats 10.231.0.1 as local)
# and reaches the other hosts through netns-rsh. The NEFFs are in $TMPDIR, which every
# namespace shares (one filesystem). Exit 0, one row per size and the average line.
mpirun_case() {
  local hosts="$1" per="$2" op="$3" name d r hs=() k rows
  r=$((hosts * per))
  name="${hosts}x${per}-nccom-test-hosts-$op"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  if ! command -v mpirun >/dev/null; then
    echo "FAIL $name: mpirun is not installed (apt install openmpi-bin)" >&2
    failed=$((failed + 1)); failures+=("$name"); return 0
  fi
  for ((k = 0; k < hosts; k++)); do hs+=("$(host_addr "$k")"); done
  d="$work/mpirun-$name"
  mkdir -p "$d/tmp"
  local rc=0
  host_exec 0 env TMPDIR="$d/tmp" OMPI_MCA_plm_rsh_agent="$HOSTS_RSH_AGENT" \
    NEURON_RT_EXEC_TIMEOUT=60 timeout -k 5 "$per_proc_timeout" \
    "$lib/nccom-test" -r "$r" -N "$hosts" --hosts "${hs[@]}" "$op" -b 64K -e 1M -f 16 \
    -d fp32 -n 2 -w 1 --check --non-interactive > "$d/out" 2> "$d/err" || rc=$?
  # Sizes 64 KiB and 1 MiB: two rows, each passed (a failed size prints "Failure").
  rows="$(grep -cE '^ +(65536|1048576) +[0-9]+ +fp32 +[0-9.]+ ' "$d/out" || true)"
  if [ "$rc" = 0 ] && [ "$rows" = 2 ] && ! grep -q Failure "$d/out" \
      && grep -q '^Avg bus bandwidth:' "$d/out"; then
    echo "ok   $name: nccom-test -r $r -N $hosts --hosts ${hs[*]} through mpirun, fp32 64 KiB and 1 MiB, checked"
    passed=$((passed + 1))
  else
    echo "FAIL $name: exit $rc, $rows good row(s) of 2" >&2
    sed 's/^/    stdout: /' "$d/out" >&2
    sed 's/^/    stderr: /' "$d/err" >&2
    failed=$((failed + 1)); failures+=("$name")
  fi
}
echo "# nccom-test --hosts: mpirun in host 0, other hosts through $HOSTS_RSH_AGENT"
mpirun_case 2 1 allr
mpirun_case 2 2 allr
mpirun_case 2 2 allg

# -- point-to-point tensors across hosts (capi-tests/sendrecv/): the KV-cache hand-off from a
# sender on host 0 (core 0) to a receiver on host 1 (core 1), each naming the other's address;
# then a cable cut while a transfer waits, which the survivor must see as a failed request
# within OPENNRT_NET_PEER_TIMEOUT (2 s here) + 5 s, after which it closes and starts again.
sr_port=33000
# sr_start DIR SIDE HOST "N BYTES PLACEMENT" PROG...: start `PROG SIDE PEER_IP PEER_LNC LNC N
# BYTES PLACEMENT` on HOST (core = host index) in the background (pid in $!).
sr_start() {
  local d="$1" side="$2" h="$3" tail="$4"; shift 4
  local peer=$((1 - h)) rest
  read -r -a rest <<< "$tail"
  NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1 NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$sr_port" \
    OPENNRT_NET_PEER_TIMEOUT=2 OPENNRT_NCFW_PATH="$lib/libncfw.so" LD_LIBRARY_PATH="$lib" OPENNRT_LIB_DIR="$lib" \
    host_exec "$h" "$@" "$side" "$(host_addr "$peer")" "$peer" "$h" "${rest[@]}" \
    > "$d/out-$side" 2> "$d/err-$side" < /dev/null &
}
sr_fail() {
  local name="$1" d="$2" why="$3" f
  echo "FAIL $name: $why" >&2
  for f in "$d"/out-* "$d"/err-*; do echo "---- $f" >&2; cut -c1-300 "$f" | tail -20 >&2; done
  failed=$((failed + 1)); failures+=("$name")
}
# sendrecv_case SENDER RECEIVER N BYTES PLACEMENT: SENDER/RECEIVER are c or py.
sendrecv_case() {
  local snd="$1" rcv="$2" n="$3" bytes="$4" pl="$5" name d a b rc=0 prog
  name="2x1-sendrecv: $n x $bytes B ${pl} tensors, $snd sender on host 0 -> $rcv receiver on host 1, every byte checked"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/sendrecv-$snd-$rcv-$pl"; mkdir -p "$d"
  sr_port=$((sr_port + 1))
  prog() { if [ "$1" = c ]; then echo "$work/kv_handoff"; else echo "python3 $root/capi-tests/python/kv_handoff.py"; fi; }
  # shellcheck disable=SC2046 # the program is one or two words
  sr_start "$d" recv 1 "$n $bytes $pl" timeout -k 5 "$per_proc_timeout" $(prog "$rcv"); a=$!
  # shellcheck disable=SC2046
  sr_start "$d" send 0 "$n $bytes $pl" timeout -k 5 "$per_proc_timeout" $(prog "$snd"); b=$!
  wait "$a" || rc=$?
  wait "$b" || rc=$?
  if [ "$rc" != 0 ]; then sr_fail "$name" "$d" "exit $rc"; return 0; fi
  if ! grep -q "every byte checked" "$d/out-recv"; then sr_fail "$name" "$d" "the receiver reports no checked bytes"; return 0; fi
  echo "ok   $name"
  echo "      $(tail -1 "$d/out-recv")"
  passed=$((passed + 1))
}
# sendrecv_cut STALLED: the STALLED side (send or recv) stops after 4 of 16 transfers of 16 MiB;
# the cable of its host is cut; the other side must fail its waiting requests and start again.
sendrecv_cut() {
  local stalled="$1" survivor name d h_st h_sv k s rc=0 t0 el p
  survivor=$([ "$stalled" = send ] && echo recv || echo send)
  h_st=$([ "$stalled" = send ] && echo 0 || echo 1); h_sv=$((1 - h_st))
  name="2x1-sendrecv-fault: cable of host $h_st ($stalled side) cut while the $survivor side waits"
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/sendrecv-cut-$stalled"; mkdir -p "$d"
  sr_port=$((sr_port + 1))
  KV_STALL_AFTER=4 sr_start "$d" "$stalled" "$h_st" "16 16777216 device" "$work/kv_handoff"; k=$!
  KV_EXPECT_FAILURE=1 sr_start "$d" "$survivor" "$h_sv" "16 16777216 host" timeout -k 5 60 "$work/kv_handoff"; s=$!
  for _ in $(seq 600); do grep -q stalling "$d/out-$stalled" 2>/dev/null && break; sleep 0.1; done
  if ! grep -q stalling "$d/out-$stalled"; then
    sr_fail "$name" "$d" "the $stalled side never stalled"
  else
    t0=$(date +%s.%N)
    link_down "$h_st"
    wait "$s" || rc=$?
    el=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    link_up "$h_st"
    if [ "$rc" != 0 ]; then sr_fail "$name" "$d" "the $survivor side exited $rc"
    elif awk -v e="$el" 'BEGIN { exit !(e > 7) }'; then sr_fail "$name" "$d" "the $survivor side took $el s, more than OPENNRT_NET_PEER_TIMEOUT + 5 s"
    else
      echo "ok   $name"
      echo "      after $el s: $(grep 'as expected' "$d/out-$survivor")"
      passed=$((passed + 1))
    fi
  fi
  for p in $(ip netns pids "$(host_ns "$h_st")"); do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = kv_handoff ] && kill -KILL "$p" 2>/dev/null
  done
  wait "$k" 2>/dev/null || true
}
echo "# point-to-point send/recv across hosts (capi-tests/sendrecv/kv_handoff.c and its Python twin)"
cc -std=c11 -Wall -Wextra -Werror -I"$root/include" -o "$work/kv_handoff" "$root/capi-tests/sendrecv/kv_handoff.c" \
  -L"$lib" -lnrt -Wl,-rpath,"$lib"
sendrecv_case c c 8 4194304 device
sendrecv_case c py 4 3145728 host
sendrecv_case py c 4 1048576 device
sendrecv_cut send
sendrecv_cut recv

# ---- faults, mid-collective: a cut cable (link_down: the bridge port of a host goes down)
# and a killed process (SIGKILL). Every surviving process must fail within
# NEURON_RT_EXEC_TIMEOUT + 5 s of the fault with 1206 (the network) or 1200 (a dead peer),
# naming a host's address, and leave nothing in its host's /dev/shm.
fault_exec_timeout=10
FAULT_N=0
fault_cmd() {
  printf '%s\n' "$lib/opennrt" perf-rank --op all_reduce --ranks "$FAULT_N" --procs "$FAULT_N" \
    --proc "$1" --dtype fp32 --redop add --counts "$big" --iters 1000000 --check 1
}
# fault_case HOSTS PER cut HOST | fault_case HOSTS PER kill PROCESS
fault_case() {
  local hosts="$1" per="$2" mode="$3" victim="$4" name d n p h t0 rc el line ok=1 why=""
  local pids=() rootid codes
  case "$mode" in
    cut) name="${hosts}x${per}-fault: cable of host $victim cut mid-collective"; codes='1206' ;;
    kill) name="${hosts}x${per}-fault: process $victim (host $((victim / per))) killed mid-collective"; codes='1200|1206' ;;
  esac
  if [ -n "$only" ] && ! [[ "$name" =~ $only ]]; then skipped=$((skipped + 1)); return 0; fi
  d="$work/fault-$hosts-$per-$mode-$victim"
  mkdir -p "$d"
  n=$((hosts * per)); FAULT_N=$n
  port=$((port + 1)); rootid="$(host_addr 0):$port"
  for ((p = 0; p < n; p++)); do
    h=$((p / per)); echo "$h" > "$d/host$p"
    mapfile -t argv < <(fault_cmd "$p")
    NEURON_RT_LOG_LEVEL=INFO NEURON_RT_VISIBLE_CORES="$p" NEURON_RT_ROOT_COMM_ID="$rootid" \
      NEURON_RT_EXEC_TIMEOUT="$fault_exec_timeout" OPENNRT_NCFW_PATH="$lib/libncfw.so" \
      host_exec "$h" timeout -k 5 "$per_proc_timeout" "${argv[@]}" \
      < /dev/null > "$d/out$p" 2> "$d/err$p" &
    pids+=($!)
  done
  # Mid-collective: every process has its network proxy up (its first collective spanning
  # hosts has begun), then a second more of collectives.
  local waited=0
  until [ "$(grep -l 'network proxy up' "$d"/err* 2>/dev/null | wc -l)" = "$n" ]; do
    sleep 0.2; waited=$((waited + 1))
    if [ "$waited" -gt 300 ]; then ok=0; why="not every process brought its network proxy up in 60 s"; break; fi
  done
  sleep 1
  t0=$(date +%s.%N)
  local dead=()
  if [ "$ok" = 1 ]; then
    case "$mode" in
      cut) link_down "$victim" ;;
      kill)
        # The process itself, not its timeout wrapper: the one whose command is opennrt and
        # whose --proc is the victim.
        for p in $(ip netns pids "$(host_ns $((victim / per)))"); do
          if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = opennrt ] \
              && tr '\0' ' ' < "/proc/$p/cmdline" | grep -q -- "--proc $victim "; then
            kill -KILL "$p"; dead+=("$p")
          fi
        done
        [ "${#dead[@]}" = 1 ] || { ok=0; why="found ${#dead[@]} processes to kill, not 1"; } ;;
    esac
  fi
  for ((p = 0; p < n; p++)); do
    rc=0; wait "${pids[$p]}" || rc=$?
    el=$(awk -v a="$(date +%s.%N)" -v b="$t0" 'BEGIN { printf "%.2f", a - b }')
    echo "$rc" > "$d/rc$p"
    [ "$ok" = 1 ] || continue
    if [ "$mode" = kill ] && [ "$p" = "$victim" ]; then continue; fi
    line="$(grep -h "opennrt perf-rank (process $p)" "$d/err$p" | tail -1)"
    if [ "$rc" != 3 ]; then ok=0; why="process $p exited with $rc, not 3 (a runtime error)"
    elif ! [[ "$line" =~ (\(|status\ )($codes)\)?$ ]]; then ok=0; why="process $p failed with another status: $line"
    elif ! grep -qE "ERROR .*10\.231\.0\.[0-9]+" "$d/err$p"; then ok=0; why="process $p's error names no host address"
    elif awk -v e="$el" -v t="$fault_exec_timeout" 'BEGIN { exit !(e > t + 5) }'; then ok=0; why="process $p failed ${el} s after the fault, more than NEURON_RT_EXEC_TIMEOUT + 5 s"
    fi
    echo "      process $p (host $((p / per))): exit $rc after $el s: ${line#opennrt perf-rank }" >> "$d/summary"
  done
  [ "$mode" = cut ] && link_up "$victim"
  # Nothing left in the /dev/shm of a host with a survivor (a host whose only process was
  # killed keeps what that process made, as any crashed process does).
  if [ "$ok" = 1 ]; then
    for ((h = 0; h < hosts; h++)); do
      if [ "$mode" = kill ] && [ "$per" = 1 ] && [ "$h" = "$victim" ]; then
        # The killed process's live device tensors stay named (src/runtime/tensor.rs), and no
        # survivor on this host removes them: cleared so the next case starts clean.
        host_exec "$h" sh -c 'rm -f /dev/shm/opennrt-*'
        continue
      fi
      left="$(host_exec "$h" ls /dev/shm | grep '^opennrt-' || true)"
      if [ -n "$left" ]; then ok=0; why="host $h's /dev/shm still holds: $left"; fi
    done
  fi
  if [ "$ok" = 1 ]; then
    echo "ok   $name"
    cat "$d/summary"
    passed=$((passed + 1))
  else
    echo "FAIL $name: $why" >&2
    show_stderr "$d" "$n"
    failed=$((failed + 1)); failures+=("$name")
  fi
}
echo "# faults: NEURON_RT_EXEC_TIMEOUT=$fault_exec_timeout; every survivor must fail within it + 5 s"
fault_case 2 1 cut 1
fault_case 2 1 kill 1
fault_case 2 2 cut 1
fault_case 2 2 kill 3

echo "# hosts: $passed passed, $failed failed, $skipped not selected"
if [ "$failed" != 0 ]; then
  printf 'hosts: FAILED: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "hosts: all multi-host tests passed"
