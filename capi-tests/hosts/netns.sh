# shellcheck shell=bash
# Several "hosts" on one machine: a sourceable bash library (capi-tests/hosts/README.md).
#
#   source capi-tests/hosts/netns.sh
#   hosts_up 2                 # namespaces onrt<$$>h0, onrt<$$>h1 and the bridge onrt<$$>br
#   host_exec 0 some command   # in host 0's network namespace, with its own /dev/shm
#   host_addr 1                # 10.231.0.2
#   link_down 1; link_up 1     # cut / restore host 1's cable
#   hosts_down                 # (also the EXIT/INT/TERM trap hosts_up installs)
#
# Each host k is a network namespace holding `lo` and `eth0` (one end of a veth pair whose
# other end is a port of the Linux bridge `br0` in the bridge namespace), with
# 10.231.0.(k+1)/24 and fd31:6e72:7400::(k+1)/64. Nothing is added to, or changed in, the root
# namespace: its interfaces, routes and addresses are never touched.
#
# Each host also has its own /dev/shm. A holder process per host (`sleep infinity`, started by
# hosts_up as `ip netns exec NS unshare --mount --propagation private sh -c 'mount -t tmpfs …
# /dev/shm && exec sleep infinity'`) keeps a private mount namespace with a fresh tmpfs on
# /dev/shm alive, and host_exec enters the holder's network AND mount namespaces (nsenter).
# So every process on host k sees the same /dev/shm (two ranks on one host share their device
# segments, as on a real machine), and no process on another host, nor the root namespace,
# sees it: only the network joins the hosts. (A fresh tmpfs per host_exec call, without the
# holder, would give two processes of one host two different /dev/shm.)
#
# Requires root, `ip` (iproute2), `unshare` and `nsenter` (util-linux). Functions return
# non-zero on failure; callers run under `set -euo pipefail`. State (one line per host: index,
# namespace, IPv4, IPv6, holder pid) is in $HOSTS_STATE/hosts, which netns-rsh reads.

HOSTS_NET4="10.231.0"          # one private /24, used only inside our namespaces
HOSTS_NET6="fd31:6e72:7400:"   # one ULA /64 (fd31:6e72:7400::/64), likewise
HOSTS_PREFIX="onrt$$"          # namespace names: <prefix>h<k> and <prefix>br
HOSTS_BR="${HOSTS_PREFIX}br"
HOSTS_N=0
HOSTS_NS=()                    # HOSTS_NS[k]: host k's namespace
HOSTS_ADDR=()                  # HOSTS_ADDR[k]: host k's IPv4 address
HOSTS_ADDR6=()                 # HOSTS_ADDR6[k]: host k's IPv6 address
HOSTS_HOLDER=()                # HOSTS_HOLDER[k]: pid of host k's /dev/shm holder
HOSTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
HOSTS_STATE="${TMPDIR:-/tmp}/${HOSTS_PREFIX}.hosts"
export HOSTS_PREFIX HOSTS_NET4 HOSTS_NET6 HOSTS_STATE

host_ns() { printf '%s\n' "${HOSTS_PREFIX}h$1"; }
host_addr() { printf '%s\n' "$HOSTS_NET4.$(($1 + 1))"; }
host_addr6() { printf '%s\n' "$HOSTS_NET6:$(($1 + 1))"; }

# Why this machine cannot run the hosts (empty: it can). No side effects beyond a probe
# namespace that is removed at once.
hosts_unsupported() {
  if [ "$(id -u)" != 0 ]; then echo "not root (network namespaces need CAP_SYS_ADMIN)"; return; fi
  command -v ip >/dev/null || { echo "ip (iproute2) is not installed"; return; }
  command -v unshare >/dev/null || { echo "unshare (util-linux) is not installed"; return; }
  command -v nsenter >/dev/null || { echo "nsenter (util-linux) is not installed"; return; }
  local probe="${HOSTS_PREFIX}probe"
  if ! ip netns add "$probe" 2>/dev/null; then echo "ip netns add fails (no netns support)"; return; fi
  local why=""
  if ! ip -n "$probe" link add v0 type veth peer name v1 2>/dev/null; then
    why="cannot create a veth pair (no veth support)"
  elif ! ip -n "$probe" link add b0 type bridge 2>/dev/null; then
    why="cannot create a bridge (no bridge support)"
  elif ! ip netns exec "$probe" unshare --mount --propagation private \
      sh -c 'mount -t tmpfs -o size=1m none /dev/shm' 2>/dev/null; then
    why="cannot mount a private tmpfs on /dev/shm (no mount namespace support)"
  fi
  ip netns del "$probe" 2>/dev/null || true
  echo "$why"
}

# hosts_up N: create N hosts and the bridge; installs hosts_down as the EXIT/INT/TERM trap.
hosts_up() {
  local n="$1" k ns
  trap hosts_down EXIT
  trap 'hosts_down; exit 130' INT
  trap 'hosts_down; exit 143' TERM
  HOSTS_N="$n"
  HOSTS_NS=() HOSTS_ADDR=() HOSTS_ADDR6=() HOSTS_HOLDER=()
  mkdir -p "$HOSTS_STATE"
  : > "$HOSTS_STATE/hosts"
  ip netns add "$HOSTS_BR"
  ip -n "$HOSTS_BR" link set lo up
  ip -n "$HOSTS_BR" link add br0 type bridge
  ip -n "$HOSTS_BR" link set br0 up
  # The bridge's IPv6 would otherwise run duplicate address detection on no address of ours.
  ip netns exec "$HOSTS_BR" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
  for ((k = 0; k < n; k++)); do
    ns="$(host_ns "$k")"
    HOSTS_NS+=("$ns")
    HOSTS_ADDR+=("$(host_addr "$k")")
    HOSTS_ADDR6+=("$(host_addr6 "$k")")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Both ends are created inside the bridge namespace, then one end moves to the host:
    # no interface ever appears in the root namespace.
    ip -n "$HOSTS_BR" link add "p$k" type veth peer name eth0
    ip -n "$HOSTS_BR" link set eth0 netns "$ns"
    ip -n "$HOSTS_BR" link set "p$k" master br0
    ip -n "$HOSTS_BR" link set "p$k" up
    ip -n "$ns" addr add "${HOSTS_ADDR[$k]}/24" dev eth0
    ip -n "$ns" addr add "${HOSTS_ADDR6[$k]}/64" dev eth0 nodad
    ip -n "$ns" link set eth0 up
    host_holder_start "$k"
    printf '%s %s %s %s %s\n' "$k" "$ns" "${HOSTS_ADDR[$k]}" "${HOSTS_ADDR6[$k]}" \
      "${HOSTS_HOLDER[$k]}" >> "$HOSTS_STATE/hosts"
  done
  # Wait until every cable is up at both ends (the ports come up asynchronously). No STP: a
  # port of the bridge forwards as soon as it is up.
  local tries
  for ((k = 0; k < n; k++)); do
    for ((tries = 0; tries < 100; tries++)); do
      if ip -n "${HOSTS_NS[$k]}" -o link show eth0 | grep -q 'state UP' \
          && ip -n "$HOSTS_BR" -o link show "p$k" | grep -q 'state UP'; then
        break
      fi
      sleep 0.05
    done
  done
}

# host_holder_start k: start host k's /dev/shm holder and wait until its tmpfs is mounted.
host_holder_start() {
  local k="$1" pid tries
  # ip netns exec, unshare (no --fork) and sh all exec: $! ends up as the sleep.
  ip netns exec "$(host_ns "$k")" unshare --mount --propagation private \
    sh -c 'mount -t tmpfs -o size=4g,mode=1777 none /dev/shm && exec sleep infinity' \
    </dev/null >/dev/null 2>&1 &
  pid=$!
  disown "$pid"   # hosts_down kills it; no "Killed" line from this shell
  for ((tries = 0; tries < 100; tries++)); do
    if [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; then
      HOSTS_HOLDER[k]="$pid"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  echo "netns.sh: host $k: the /dev/shm holder did not start (mount failed?)" >&2
  return 1
}

# host_index HOST: the index of a host given as its namespace name, IPv4 or IPv6 address, or k.
host_index() {
  local h="$1" k
  for ((k = 0; k < HOSTS_N; k++)); do
    case "$h" in
      "${HOSTS_NS[$k]}" | "${HOSTS_ADDR[$k]}" | "${HOSTS_ADDR6[$k]}" | "[${HOSTS_ADDR6[$k]}]" | "$k")
        echo "$k"; return 0 ;;
    esac
  done
  echo "netns.sh: no host $h" >&2
  return 1
}

# host_exec k cmd...: run cmd in host k's network namespace and mount namespace (the host's
# own /dev/shm, shared by every process of host k). The environment and cwd are passed on.
host_exec() {
  local k="$1"
  shift
  nsenter --target "${HOSTS_HOLDER[$k]}" --net --mount --wd="$PWD" -- "$@"
}

link_down() { ip -n "$HOSTS_BR" link set "p$1" down; }
link_up() { ip -n "$HOSTS_BR" link set "p$1" up; }

# hosts_down: kill every process in our namespaces and delete them (the veths go with them).
# Idempotent; also removes namespaces of this prefix left by an earlier hosts_up in this shell.
hosts_down() {
  local ns pid left
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${HOSTS_PREFIX}(h[0-9]+|br|probe)\$" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  left="$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${HOSTS_PREFIX}" || true)"
  if [ -n "$left" ]; then
    echo "netns.sh: namespaces left after hosts_down: $left" >&2
    return 1
  fi
  rm -rf "$HOSTS_STATE"
  HOSTS_N=0
  HOSTS_NS=() HOSTS_ADDR=() HOSTS_ADDR6=() HOSTS_HOLDER=()
}

# The rsh agent for Open MPI (capi-tests/hosts/netns-rsh).
HOSTS_RSH_AGENT="$HOSTS_DIR/netns-rsh"
export HOSTS_RSH_AGENT

# hosts_down_checked WHO SHM_BEFORE: hosts_down, then check that no namespace of ours is left
# and that the root namespace's /dev/shm holds no opennrt-* name that SHM_BEFORE (a sorted
# listing taken at the start) did not; prints "WHO: FAILED: …" and returns 1 otherwise.
hosts_down_checked() {
  local who="$1" before="$2" leaked=0 left new
  hosts_down || leaked=1
  left="$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${HOSTS_PREFIX}" || true)"
  if [ -n "$left" ]; then
    echo "$who: FAILED: namespaces left behind: $left" >&2
    leaked=1
  fi
  new="$(comm -13 <(printf '%s\n' "$before") <(ls /dev/shm | grep '^opennrt-' | sort || true) | grep . || true)"
  if [ -n "$new" ]; then
    echo "$who: FAILED: the run left in the root namespace's /dev/shm: $new" >&2
    leaked=1
  fi
  return "$leaked"
}
