#!/usr/bin/env bash
# Point-to-point tensors between processes (nrt_async_sendrecv.h), on one host:
#   * sendrecv_rules.c: every rule of the API through the C ABI, in one process;
#   * kv_handoff.c: a KV-cache hand-off between two processes, both checking every byte, for
#     device and host tensors, one and several chunks, either side first;
#   * faults: a peer killed mid-stream fails the survivor's requests with a status (never a
#     hang), and the survivor closes and starts its service again.
# capi-tests/hosts/run.sh runs the hand-off and a cut cable across network namespaces.
#
#   bash capi-tests/sendrecv/run.sh [lib-dir]          (default target/release)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
lib="${1:-$root/target/release}"
lib="$(cd "$lib" && pwd)"
out="$root/capi-tests/build"
mkdir -p "$out"
"$root/shim/links.sh" "$lib" >/dev/null
CFLAGS=(-std=c11 -Wall -Wextra -Werror -I"$root/include")
say() { printf 'sendrecv: %s\n' "$*"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

for t in kv_handoff sendrecv_rules; do
  echo "+ gcc $t.c"
  gcc "${CFLAGS[@]}" -o "$out/$t" "$here/$t.c" -L"$lib" -lnrt
done
export LD_LIBRARY_PATH="$lib" NEURON_RT_ASYNC_SENDRECV_EXPERIMENTAL_ENABLED=1
logs="$(mktemp -d "${TMPDIR:-/tmp}/opennrt-sendrecv.XXXXXX")"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT

NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$(free_port)" timeout 120 "$out/sendrecv_rules" 2>"$logs/rules.err" \
  || { cat "$logs/rules.err" >&2; say "FAILED: sendrecv_rules"; exit 1; }

# handoff NAME FIRST DELAY N BYTES SEND_PLACEMENT RECV_PLACEMENT [VAR=VALUE...]: a receiver on
# core 1 and a sender on core 0; FIRST (send|recv) starts DELAY seconds before the other.
handoff() {
  local name="$1" first="$2" delay="$3" n="$4" bytes="$5" sp="$6" rp="$7"
  shift 7
  local port rc=0 a b
  port="$(free_port)"
  local env=(env NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$port" "$@")
  local recv=("${env[@]}" timeout 120 "$out/kv_handoff" recv 127.0.0.1 0 1 "$n" "$bytes" "$rp")
  local send=("${env[@]}" timeout 120 "$out/kv_handoff" send 127.0.0.1 1 0 "$n" "$bytes" "$sp")
  if [ "$first" = recv ]; then
    "${recv[@]}" >"$logs/$name.recv" 2>&1 & a=$!
    sleep "$delay"
    "${send[@]}" >"$logs/$name.send" 2>&1 & b=$!
  else
    "${send[@]}" >"$logs/$name.send" 2>&1 & b=$!
    sleep "$delay"
    "${recv[@]}" >"$logs/$name.recv" 2>&1 & a=$!
  fi
  wait "$a" || rc=$?
  wait "$b" || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$logs/$name.send" "$logs/$name.recv" >&2
    say "FAILED: $name (exit $rc)"
    exit 1
  fi
  say "$name: $(tail -1 "$logs/$name.recv")"
}

handoff device-to-host recv 0 16 1048576 device host
handoff host-to-device-chunks send 0 3 20971520 host device
handoff sender-first send 1 4 65536 device device
handoff small-chunks recv 0 8 1048579 host host OPENNRT_SENDRECV_CHUNK=64K
handoff empty-and-tiny recv 0 2 1 device host

# fault SIDE_KILLED: the other side expects its requests to fail once the killed peer is gone.
fault() {
  local killed="$1" survivor port start rc=0 k s
  survivor=$([ "$killed" = send ] && echo recv || echo send)
  port="$(free_port)"
  local env=(env NEURON_RT_ASYNC_SENDRECV_BOOTSTRAP_PORT="$port" OPENNRT_NET_PEER_TIMEOUT=2)
  local peer_of_recv=(127.0.0.1 0 1) peer_of_send=(127.0.0.1 1 0)
  local args_k args_s
  if [ "$killed" = send ]; then args_k=("${peer_of_send[@]}"); args_s=("${peer_of_recv[@]}"); else args_k=("${peer_of_recv[@]}"); args_s=("${peer_of_send[@]}"); fi
  # No `timeout` around the side that is killed: the signal must reach kv_handoff itself (the
  # EXIT trap kills it if the script stops first).
  "${env[@]}" KV_STALL_AFTER=4 "$out/kv_handoff" "$killed" "${args_k[@]}" 16 16777216 device \
    >"$logs/fault-$killed.k" 2>&1 & k=$!
  pids+=("$k")
  "${env[@]}" KV_EXPECT_FAILURE=1 timeout 60 "$out/kv_handoff" "$survivor" "${args_s[@]}" 16 16777216 host \
    >"$logs/fault-$killed.s" 2>&1 & s=$!
  pids+=("$s")
  for _ in $(seq 600); do grep -q stalling "$logs/fault-$killed.k" && break; sleep 0.1; done
  grep -q stalling "$logs/fault-$killed.k" || { cat "$logs/fault-$killed.k" "$logs/fault-$killed.s" >&2; say "FAILED: the $killed side never got going"; exit 1; }
  start=$SECONDS
  kill -9 "$k"
  wait "$k" 2>/dev/null || true
  wait "$s" || rc=$?
  if [ "$rc" != 0 ]; then
    cat "$logs/fault-$killed.s" >&2
    say "FAILED: the $survivor side after its peer was killed (exit $rc)"
    exit 1
  fi
  say "peer killed ($killed): the $survivor side failed its requests and started again in $((SECONDS - start)) s: $(grep 'as expected' "$logs/fault-$killed.s")"
}
fault send
fault recv
say "all cases passed"
