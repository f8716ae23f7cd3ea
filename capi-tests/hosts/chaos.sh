#!/usr/bin/env bash
# Network chaos across hosts (issue 28 item 4, the network half; capi-tests/hosts/README.md,
# "Network chaos"): rounds of multi-host jobs, each a sequence of collectives whose every result
# is checked, while one fault is injected into a random host at a random moment.
#
#   bash capi-tests/hosts/chaos.sh [lib-dir]     (default target/release; needs root)
#
# Fault kinds, inside the namespaces only (the root namespace is never touched):
#   none      nothing: every process must succeed
#   cut       the host's cable is cut for good (link_down): survivors fail with a lost peer
#   flap      the cable goes down and up again well below OPENNRT_NET_PEER_TIMEOUT: TCP
#             retransmits across it, so the job must succeed
#   loss      a share of the host's packets is dropped both ways for a while (nftables
#             `numgen random`, probed at run time; SKIPPED when nft or nf_tables is missing)
#   throttle  the host's egress is throttled through a token bucket (tc tbf: a low rate, a
#             small queue that drops what overflows) for a while
# Every process must end with exit 0 (every element checked and exact), or with exit 3 naming
# one of the statuses the contract allows for a lost peer (1206, 1200, 5) within
# NEURON_RT_EXEC_TIMEOUT + 5 s + the fault's length of the fault; a wrong element (exit 1), any
# other status (NRT_FAILURE included: a peer that left is a missing participant) or a process
# killed by its timeout (a hang) is a failure. After every round, every host's /dev/shm must
# hold no opennrt-* name. The namespaces go at the end, on failure too (the EXIT trap).
#
# Environment:
#   OPENNRT_CHAOS_SEED=N      replay a run (printed at the start; default: a fresh one)
#   OPENNRT_CHAOS_ROUNDS=N    rounds (default 10)
#   OPENNRT_CHAOS_FAULTS=LIST the fault kinds to draw from (default: none,cut,flap,loss,throttle)
#   OPENNRT_TEST_STRICT=1     no root / no netns support fails instead of skipping
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
strict="${OPENNRT_TEST_STRICT:-0}"
rounds="${OPENNRT_CHAOS_ROUNDS:-10}"
seed="${OPENNRT_CHAOS_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}"
IFS=, read -r -a kinds <<< "${OPENNRT_CHAOS_FAULTS:-none,cut,flap,loss,throttle}"

# Short timeouts keep a faulted round short. A peer silent past the peer timeout is lost
# (docs/design.md §2 item 12); a flap is kept below a third of it, so that TCP's retransmission
# (backing off from 200 ms: 0.2, 0.6, 1.4 s after the cut) reaches the peer well within it.
peer_timeout=3
exec_timeout=8
slack=5                 # seconds beyond the bound for process exit, nrt_close and scheduling
per_proc_timeout=60     # the `timeout` wrapper: a process still running then has hung

# shellcheck source=capi-tests/hosts/netns.sh
source "$here/netns.sh"

skip() {
  if [ "$strict" = 1 ]; then
    echo "chaos: FAILED: cannot run: $* (OPENNRT_TEST_STRICT=1)" >&2
    exit 1
  fi
  echo "chaos: SKIPPED: $*"
  exit 0
}
why="$(hosts_unsupported)"
[ -z "$why" ] || skip "$why"
for f in opennrt libncfw.so; do
  [ -e "$lib/$f" ] || { echo "chaos: $lib/$f is missing (cargo build --release --workspace)" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/opennrt-chaos.XXXXXX")"
# The EXIT trap: remove every namespace (also on failure), then check none is left. Every
# process of the run lives in a host's mount namespace, whose /dev/shm is checked after each
# round and is private (checked below). The root namespace's /dev/shm is not compared before
# and after, unlike run.sh: on a shared machine, tests of other checkouts write there meanwhile.
finish() {
  local rc=$? leaked=0 left
  trap - EXIT INT TERM
  hosts_down || leaked=1
  left="$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${HOSTS_PREFIX}" || true)"
  if [ -n "$left" ]; then
    echo "chaos: FAILED: namespaces left behind: $left" >&2
    leaked=1
  fi
  rm -rf "$work"
  if [ "$leaked" = 1 ] && [ "$rc" = 0 ]; then rc=1; fi
  if [ "$rc" = 0 ]; then echo "chaos: cleanup checked: no namespace of ours is left"; fi
  exit "$rc"
}

cc -std=c11 -Wall -Wextra -Werror -I"$root/include" -o "$work/host_ag" "$here/host_ag.c" \
  -L"$lib" -lnrt -Wl,-rpath,"$lib"

max_hosts=3
hosts_up "$max_hosts"
trap finish EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Each host's /dev/shm is its own: a name made on host 0 is seen neither on host 1 nor here.
host_exec 0 sh -c 'echo probe > /dev/shm/onrt-chaos-probe'
if host_exec 1 test -e /dev/shm/onrt-chaos-probe || [ -e /dev/shm/onrt-chaos-probe ]; then
  echo "chaos: FAILED: a file in host 0's /dev/shm is visible on host 1 or in the root namespace" >&2
  exit 1
fi
host_exec 0 rm -f /dev/shm/onrt-chaos-probe

# ---- which fault kinds this machine can inject (probed inside host 0, then undone)
loss_why=""
if ! command -v nft >/dev/null; then
  loss_why="nft is not installed (apt install nftables)"
elif ! ip netns exec "$(host_ns 0)" nft -f - <<'EOF' 2>"$work/nft-probe"
table inet onrtchaos {
  chain out { type filter hook output priority 0; numgen random mod 100 < 1 drop; }
}
EOF
then
  loss_why="nftables does not work in a namespace here: $(head -1 "$work/nft-probe")"
else
  ip netns exec "$(host_ns 0)" nft delete table inet onrtchaos
fi
throttle_why=""
if ! ip netns exec "$(host_ns 0)" tc qdisc add dev eth0 root tbf rate 10mbit burst 32kb limit 64kb 2>"$work/tbf-probe"; then
  throttle_why="tc tbf does not work here: $(head -1 "$work/tbf-probe")"
else
  ip netns exec "$(host_ns 0)" tc qdisc del dev eth0 root
fi
echo "chaos: seed $seed (OPENNRT_CHAOS_SEED=$seed to replay), $rounds rounds, faults: ${kinds[*]}"
echo "chaos: OPENNRT_NET_PEER_TIMEOUT=$peer_timeout NEURON_RT_EXEC_TIMEOUT=$exec_timeout"
[ -z "$loss_why" ] || echo "chaos: loss: SKIPPED: $loss_why"
[ -z "$throttle_why" ] || echo "chaos: throttle: SKIPPED: $throttle_why"

# The PRNG is bash's $RANDOM, seeded once. It is only read in this shell (never in a $(…)
# subshell, which would not advance this shell's sequence), so a seed replays every choice.
# The moment a fault lands relative to the job's progress is the machine's, not the seed's.
RANDOM="$seed"
R=0
rnd() { R=$((RANDOM % $1)); }

# ---- faults: inject KIND on host K, undo it (undo is idempotent: the round's end calls it)
FAULT_DESC=""
inject() {
  local kind="$1" k="$2" ns
  ns="$(host_ns "$k")"
  case "$kind" in
    none) FAULT_DESC="nothing" ;;
    cut) link_down "$k"; FAULT_DESC="host $k's cable cut for good" ;;
    flap)
      link_down "$k"
      sleep "$FLAP_S"
      link_up "$k"
      FAULT_DESC="host $k's cable down for ${FLAP_S} s, then up" ;;
    loss)
      ip netns exec "$ns" nft -f - <<EOF
table inet onrtchaos {
  chain out { type filter hook output priority 0; oifname "eth0" numgen random mod 100 < $LOSS_PCT drop; }
  chain in { type filter hook input priority 0; iifname "eth0" numgen random mod 100 < $LOSS_PCT drop; }
}
EOF
      sleep "$HOLD_S"
      ip netns exec "$ns" nft delete table inet onrtchaos
      FAULT_DESC="host $k drops ${LOSS_PCT}% of its packets both ways for ${HOLD_S} s" ;;
    throttle)
      # Host k's egress and, on its bridge port, what the bridge sends it (its ingress).
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "${RATE_MBIT}mbit" burst 32kb limit 128kb
      ip netns exec "$HOSTS_BR" tc qdisc add dev "p$k" root tbf rate "${RATE_MBIT}mbit" burst 32kb limit 128kb
      sleep "$HOLD_S"
      undo throttle "$k"
      FAULT_DESC="host $k throttled to ${RATE_MBIT} Mbit/s both ways (tbf, 128 KiB queue) for ${HOLD_S} s" ;;
  esac
}
undo() {
  local kind="$1" k="$2" ns
  ns="$(host_ns "$k")"
  case "$kind" in
    cut | flap) link_up "$k" ;;
    loss) ip netns exec "$ns" nft delete table inet onrtchaos 2>/dev/null || true ;;
    throttle)
      ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
      ip netns exec "$HOSTS_BR" tc qdisc del dev "p$k" root 2>/dev/null || true ;;
  esac
}

# ---- one round
ops=(all_reduce all_gather reduce_scatter)
sizes=(256 1024 4096 16384 65536 262144)   # fp32 elements per rank: 1 KiB … 1 MiB
ag_sizes=(1 1000 65536)                     # host_ag: bytes per rank
port=34000 passed=0 failed=0 collectives=0
declare -A tally=()
failures=()

show_round() {
  local d="$1" n="$2" p
  for ((p = 0; p < n; p++)); do
    echo "---- process $p (host $(cat "$d/host$p")) exit $(cat "$d/rc$p" 2>/dev/null || echo '?'): stderr (last 15 lines)" >&2
    tail -15 "$d/err$p" | sed 's/^/    /' >&2 || true
    [ -s "$d/out$p" ] && sed 's/^/    stdout: /' "$d/out$p" | cut -c1-300 >&2
  done
}

round() {
  local r="$1" hosts per n op iters kind victim counts=() c p h d rootid fifo pids=() argv
  rnd 2; hosts=$((2 + R))
  rnd 2; per=$((1 + R))
  n=$((hosts * per))
  # The workload: opennrt perf-rank (device collectives; between hosts through the network
  # proxy), or host_ag (nrt_barrier and nrt_all_gather of host memory from C; between hosts
  # through the bootstrap's messages to the root).
  rnd 4; op="${ops[$R]:-host_all_gather}"
  rnd 3; iters=$((1 + R))
  local nsizes ag_rounds ag_bytes
  rnd 5; nsizes=$((4 + R))
  for ((c = 0; c < nsizes; c++)); do rnd "${#sizes[@]}"; counts+=("${sizes[$R]}"); done
  rnd 1000; ag_rounds=$((200 + R))
  rnd 3; ag_bytes="${ag_sizes[$R]}"
  # 64 KiB parts travel as hex through the root: a tenth of the rounds keeps the job short.
  [ "$ag_bytes" -lt 65536 ] || ag_rounds=$((ag_rounds / 10))
  rnd "${#kinds[@]}"; kind="${kinds[$R]}"
  rnd "$hosts"; victim="$R"
  local delay_ms
  rnd 500; delay_ms="$R"
  rnd 8; FLAP_S="0.$((2 + R))"                 # 0.2 … 0.9 s
  rnd 26; LOSS_PCT=$((5 + R))                   # 5 … 30 %
  rnd 4; RATE_MBIT=$((10 * (1 << R)))           # 10, 20, 40, 80 Mbit/s
  rnd 3; HOLD_S=$((1 + R))                      # 1 … 3 s
  local skipped_why=""
  case "$kind" in
    loss) skipped_why="$loss_why" ;;
    throttle) skipped_why="$throttle_why" ;;
  esac
  if [ -n "$skipped_why" ]; then
    echo "skip round $r: $kind: SKIPPED: $skipped_why"
    tally[$kind-skipped]=$((${tally[$kind-skipped]:-0} + 1))
    return 0
  fi
  local cs
  cs="$(IFS=,; echo "${counts[*]}")"
  local name="round $r: ${hosts}x${per} $op counts $cs x$iters, $kind"
  [ "$op" != host_all_gather ] || name="round $r: ${hosts}x${per} host_ag: $ag_rounds nrt_all_gather of $ag_bytes B, $kind"
  d="$work/round$r"; mkdir -p "$d"
  port=$((port + 1)); rootid="$(host_addr 0):$port"
  fifo="$d/stdin0"; mkfifo "$fifo"
  exec {hold}<>"$fifo"   # process 0's stdin, closed once the others are done (src/launch.rs)
  for ((p = 0; p < n; p++)); do
    h=$((p / per)); echo "$h" > "$d/host$p"
    if [ "$op" = host_all_gather ]; then
      argv=("$work/host_ag" "$p" "$n" "$ag_rounds" "$ag_bytes")
    else
      argv=("$lib/opennrt" perf-rank --op "$op" --ranks "$n" --procs "$n" --proc "$p" --dtype fp32
        --redop add --counts "$cs" --iters "$iters" --check 1)
      [ "$p" = 0 ] && argv+=(--wait-stdin)
    fi
    (
      rc=0
      NEURON_RT_LOG_LEVEL=INFO NEURON_RT_VISIBLE_CORES="$p" NEURON_RT_ROOT_COMM_ID="$rootid" \
        NEURON_RT_EXEC_TIMEOUT="$exec_timeout" OPENNRT_NET_PEER_TIMEOUT="$peer_timeout" \
        OPENNRT_NCFW_PATH="$lib/libncfw.so" \
        host_exec "$h" timeout -k 5 "$per_proc_timeout" "${argv[@]}" \
        < "$([ "$p" = 0 ] && echo "$fifo" || echo /dev/null)" > "$d/out$p" 2> "$d/err$p" || rc=$?
      date +%s.%N > "$d/end$p"
      echo "$rc" > "$d/rc$p"
    ) {hold}>&- &
    pids+=($!)
  done
  # The fault lands at a random moment once every process has its network proxy up (the job
  # has joined and its first collective across hosts has begun), or once the job is over.
  local waited=0 ended=0 t_fault="" outcome
  while :; do
    if [ "$(grep -l 'network proxy up' "$d"/err* 2>/dev/null | wc -l)" = "$n" ]; then break; fi
    ended=0; for ((p = 1; p < n; p++)); do [ -e "$d/rc$p" ] && ended=$((ended + 1)); done
    if [ "$ended" = $((n - 1)) ]; then break; fi
    sleep 0.1; waited=$((waited + 1))
    [ "$waited" -lt 600 ] || break
  done
  sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
  t_fault=$(date +%s.%N)
  inject "$kind" "$victim"
  # Process 0 exits once the others have (its stdin closes then).
  for ((p = 1; p < n; p++)); do wait "${pids[$p]}" || true; done
  exec {hold}>&-
  wait "${pids[0]}" || true
  undo "$kind" "$victim"

  # ---- judge
  local ok=1 why="" rc el line bound any_fail=0
  for ((p = 0; p < n; p++)); do
    rc="$(cat "$d/rc$p")"
    el=$(awk -v a="$(cat "$d/end$p")" -v b="$t_fault" 'BEGIN { printf "%.2f", a - b }')
    line="$(grep -hE "^(opennrt perf-rank \(process $p\)|host_ag: gid $p:)" "$d/err$p" | tail -1 || true)"
    case "$rc" in
      0)
        if [ "$op" = host_all_gather ]; then
          grep -q "$ag_rounds rounds of $ag_bytes bytes per rank exact" "$d/out$p" \
            || { ok=0; why="process $p exited 0 with no report of $ag_rounds exact rounds"; }
        fi
        for c in "${counts[@]}"; do
          [ "$op" != host_all_gather ] || break
          grep -qE "\"count\":$c,.*\"wrong\":0[,}]" "$d/out$p" \
            || { ok=0; why="process $p exited 0 with no exact report for count $c"; }
        done ;;
      1) ok=0; why="process $p got wrong data: $(grep -h '"wrong":[1-9]' "$d/out$p" | head -1)$line" ;;
      3)
        any_fail=1
        if [[ "$line" =~ (\(|status\ |-\>\ )(1206|1200|5)\)?$ ]]; then
          :
        else
          ok=0; why="process $p failed with a status the contract does not allow here: $line"
        fi ;;
      124 | 137) ok=0; why="process $p hung: killed by its ${per_proc_timeout} s timeout" ;;
      *) ok=0; why="process $p exited $rc: $line" ;;
    esac
    # A process that fails ends within the execution timeout (plus slack, plus the fault's
    # own length) of the fault: one peer timeout after its peer went silent, or at the
    # execution timeout, then nrt_close. One that succeeds may run on for as long as its
    # work takes, bounded by its `timeout` (a hang).
    bound=$((exec_timeout + slack + HOLD_S))
    if [ "$rc" != 0 ] && awk -v e="$el" -v b="$bound" 'BEGIN { exit !(e > b) }'; then
      ok=0; why="process $p ended $el s after the fault, more than $bound s"
    fi
    line="${line#opennrt perf-rank }"
    echo "      process $p (host $(cat "$d/host$p")): exit $rc, ${el} s after the fault${line:+: ${line#host_ag: }}" >> "$d/summary"
  done
  # Which faults may fail a job: a cable cut for good must (unless the job was already over),
  # loss and throttling may (a peer silent past the peer timeout is lost); nothing and a short
  # flap must not.
  if [ "$ok" = 1 ] && [ "$any_fail" = 1 ]; then
    case "$kind" in
      none) ok=0; why="a process failed although no fault was injected" ;;
      flap) ok=0; why="a process failed across a ${FLAP_S} s flap, below the peer timeout of $peer_timeout s" ;;
    esac
  fi
  for ((h = 0; h < hosts; h++)); do
    left="$(host_exec "$h" ls /dev/shm | grep '^opennrt-' || true)"
    if [ -n "$left" ]; then
      ok=0; why="host $h's /dev/shm still holds: $(echo "$left" | tr '\n' ' ')"
      host_exec "$h" sh -c 'rm -f /dev/shm/opennrt-*'   # so the next round starts clean
    fi
  done
  # Whether the fault landed while the job ran: some process other than 0 (which waits for
  # the others) had not ended when it began.
  local late=1
  for ((p = 1; p < n; p++)); do
    if awk -v e="$(cat "$d/end$p")" -v f="$t_fault" 'BEGIN { exit !(e > f) }'; then late=0; fi
  done
  outcome=$([ "$any_fail" = 1 ] && echo "failed as allowed" || echo "succeeded")
  [ "$late" = 0 ] || [ "$kind" = none ] || outcome="$outcome (it was over before the fault)"
  if [ "$ok" = 1 ]; then
    if [ "$op" = host_all_gather ]; then
      collectives=$((collectives + (ag_rounds + 2) * n))
    else
      collectives=$((collectives + nsizes * iters * n))
    fi
    echo "ok   $name ($FAULT_DESC, ${delay_ms} ms after the proxies were up): job $outcome"
    [ "$any_fail" = 0 ] || cat "$d/summary"
    passed=$((passed + 1))
    local key="$kind-ok"
    [ "$any_fail" = 0 ] || key="$kind-failed"
    [ "$late" = 0 ] || [ "$kind" = none ] || key="$kind-late"
    tally[$key]=$((${tally[$key]:-0} + 1))
  else
    echo "FAIL $name ($FAULT_DESC, ${delay_ms} ms after the proxies were up): $why" >&2
    cat "$d/summary" >&2
    show_round "$d" "$n"
    failed=$((failed + 1)); failures+=("$name: $why")
  fi
}

t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  round "$r"
done
summary=""
for k in "${!tally[@]}"; do summary+=" $k=${tally[$k]}"; done
echo "chaos: seed $seed: $passed rounds passed, $failed failed in $(($(date +%s) - t0)) s; $collectives rank-collectives checked;$summary"
if [ "$failed" != 0 ]; then
  printf 'chaos: FAILED: %s\n' "${failures[@]}" >&2
  echo "chaos: replay with OPENNRT_CHAOS_SEED=$seed OPENNRT_CHAOS_ROUNDS=$rounds" >&2
  exit 1
fi
echo "chaos: all rounds passed"
