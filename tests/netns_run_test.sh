#!/usr/bin/env bash
# Tests scripts/netns_run.sh over real shaped links: 3 ranks at 50 mbit, ranks 1 and 2 each send
# 4 MB to rank 0, which must receive at 70%..105% of the rate; every rank must see its
# environment in its own namespace; a failing rank must make the script exit with its status and
# stop the others (one of them ignores SIGTERM, so SIGKILL is needed); SIGTERM to the script must
# stop the ranks; with --host-address ranks reach a server on the host; with --across ranks of another
# group arrive at the slower rate; and after every run no
# namespace or interface may be left behind.
# Exit status: 0 passed, 1 failed, 77 skipped (not root, or no namespaces/veth/tbf here).
set -euo pipefail

script=$(cd "$(dirname "$0")/.." && pwd)/scripts/netns_run.sh
python=/usr/bin/python3
rate_mbit=50
port=29611

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

# ---- can this machine run it? ------------------------------------------------------------------

((EUID == 0)) || skip "needs root to create network namespaces (run as root, e.g. with sudo)"
for tool in ip tc; do
  command -v "$tool" >/dev/null || skip "$tool missing (Debian package iproute2)"
done
[[ -x $python ]] || skip "$python missing"

work=$(mktemp -d)
probe=loco-test-probe-$$-$RANDOM
cleanup() {
  ip netns del "$probe" 2>/dev/null || true
  rm -rf -- "$work"
}
trap cleanup EXIT

# A namespace with a veth pair and a tbf qdisc: everything the script needs from the kernel.
if ! ip netns add "$probe" 2>"$work/probe.err" ||
  ! ip -n "$probe" link add probe-a type veth peer name probe-b 2>>"$work/probe.err" ||
  ! tc -n "$probe" qdisc add dev probe-a root tbf rate 1mbit burst 8k limit 64k 2>>"$work/probe.err"; then
  skip "cannot create a namespace with a veth and a tbf qdisc here (no CAP_NET_ADMIN, or a kernel without veth/tbf): $(tr '\n' ' ' <"$work/probe.err")"
fi
ip netns del "$probe"

# ---- helpers -----------------------------------------------------------------------------------

snapshot() {
  ip netns list | awk '{print $1}' | sort
  echo ---
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
}

expect_no_leftovers() {
  local after
  after=$(snapshot)
  [[ $after == "$before" ]] || fail "$1: namespaces or interfaces left behind: $(diff <(echo "$before") <(echo "$after") | tr '\n' ' ')"
}

pids_dead() { # every pid listed in the files $@ is gone
  local file pid
  for file in "$@"; do
    pid=$(<"$file")
    ! kill -0 "$pid" 2>/dev/null || return 1
  done
}

before=$(snapshot)
start=$SECONDS

# ---- usage errors need no network --------------------------------------------------------------

status=0
"$script" --nproc 2 --rate 10mbit --latency 20ms -- true 2>"$work/err" || status=$?
((status == 64)) || fail "--latency: expected exit 64, got $status"
grep -q netem "$work/err" || fail "--latency: the error does not explain that netem is missing"

# ---- 3 ranks, ranks 1 and 2 send 4 MB each to rank 0 -------------------------------------------

# Connects to rank 0's server, waiting up to 20 s for it to listen (imported by the rank scripts below).
cat >"$work/connect.py" <<'PY'
import socket, time


def connect(addr, port):
    deadline = time.monotonic() + 20
    while True:
        try:
            return socket.create_connection((addr, port), timeout=20)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
PY

cat >"$work/transfer.py" <<'PY'
import json, os, selectors, socket, sys, time
from connect import connect

names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
         "LOCO_SOCKET_IFNAME"]
env = {name: os.environ.get(name) for name in names}
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
ifname = env["LOCO_SOCKET_IFNAME"]
own_namespace = sorted(os.listdir("/sys/class/net")) == sorted(["lo", ifname])
print("env", json.dumps(env), "own_namespace" if own_namespace else "SHARED_NAMESPACE", flush=True)

addr, port, size = env["MASTER_ADDR"], int(env["MASTER_PORT"]), 4 * 1000 * 1000
if rank == 0:
    server = socket.create_server((addr, port), backlog=world)
    server.settimeout(20)
    conns = [server.accept()[0] for _ in range(world - 1)]
    for conn in conns:
        conn.setblocking(False)
    got, first, last, buf = 0, None, None, bytearray(1 << 16)
    open_conns = list(conns)
    sel = selectors.DefaultSelector()
    for conn in conns:
        sel.register(conn, selectors.EVENT_READ)
    while open_conns:
        for key, _ in sel.select(timeout=20):
            n = key.fileobj.recv_into(buf)
            if n == 0:
                sel.unregister(key.fileobj)
                open_conns.remove(key.fileobj)
                continue
            first = first or time.monotonic()
            last = time.monotonic()
            got += n
    for conn in conns:
        conn.setblocking(True)
        conn.sendall(b"k")
        conn.close()
    print(f"received {got} B, aggregate {got * 8 / (last - first) / 1e6:.2f} Mbit/s", flush=True)
    sys.exit(0 if got == size * (world - 1) else 1)
else:
    sock = connect(addr, port)
    begin = time.monotonic()
    sock.sendall(bytes(size))
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)
    print(f"sent {size} B at {size * 8 / (time.monotonic() - begin) / 1e6:.2f} Mbit/s", flush=True)
PY

status=0
"$script" --nproc 3 --rate ${rate_mbit}mbit --master-port $port -- "$python" "$work/transfer.py" \
  >"$work/out" 2>"$work/err" || status=$?
cat "$work/out"
((status == 0)) || fail "transfer run exited with $status: $(cat "$work/err")"
expect_no_leftovers "transfer run"

grep -v '^\[rank [0-2]\] ' "$work/out" && fail "output lines without a [rank i] prefix"
master_addr=""
for rank in 0 1 2; do
  line=$(grep "^\[rank $rank\] env " "$work/out") || fail "rank $rank printed no environment"
  [[ $line == *own_namespace* ]] || fail "rank $rank does not see only lo and its own interface: $line"
  for expected in "\"RANK\": \"$rank\"" "\"LOCAL_RANK\": \"$rank\"" '"WORLD_SIZE": "3"' \
    '"LOCAL_WORLD_SIZE": "3"' "\"MASTER_PORT\": \"$port\"" '"LOCO_SOCKET_IFNAME": "l'; do
    [[ $line == *"$expected"* ]] || fail "rank $rank: expected $expected in $line"
  done
  [[ $line =~ \"MASTER_ADDR\":\ \"([0-9.]+)\" ]] || fail "rank $rank: no MASTER_ADDR in $line"
  addr=${BASH_REMATCH[1]}
  [[ -z $master_addr || $addr == "$master_addr" ]] || fail "ranks disagree on MASTER_ADDR"
  master_addr=$addr
done
[[ $master_addr =~ ^10\.213\.[0-9]+\.1$ ]] || fail "MASTER_ADDR $master_addr is not rank 0's 10.213.x.1"

mbit=$(sed -n 's/^\[rank 0\] received .* aggregate \([0-9.]*\) Mbit\/s$/\1/p' "$work/out")
[[ -n $mbit ]] || fail "rank 0 reported no rate"
awk -v m="$mbit" -v r="$rate_mbit" 'BEGIN { exit !(m >= 0.70 * r && m <= 1.05 * r) }' ||
  fail "rank 0 received at $mbit Mbit/s, outside 70%..105% of $rate_mbit Mbit/s"
echo "ok: rank 0 received at $mbit Mbit/s through a $rate_mbit mbit link"

# ---- --across: a slower rate between groups of ranks --------------------------------------------

# Groups {0, 1} and {2, 3}: rank 0 receives from rank 1 (its group, 50 mbit), then from rank 2 (the other
# group, 10 mbit); rank 3 stays silent.
cat >"$work/across.py" <<'PY'
import os, socket, time
from connect import connect

rank, addr, port = int(os.environ["RANK"]), os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
sizes = {1: 2 * 1000 * 1000, 2: 1000 * 1000}
if rank == 0:
    server = socket.create_server((addr, port), backlog=4)
    server.settimeout(20)
    for sender in (1, 2):
        conn = server.accept()[0]
        buf, got, first = bytearray(1 << 16), 0, None
        while n := conn.recv_into(buf):
            first = first or time.monotonic()
            got += n
        print(f"from rank {sender}: {got * 8 / (time.monotonic() - first) / 1e6:.2f} Mbit/s", flush=True)
        conn.sendall(b"k")
        conn.close()
elif rank in sizes:
    time.sleep(0.2 if rank == 1 else 2.0)  # one sender at a time
    sock = connect(addr, port)
    sock.sendall(bytes(sizes[rank]))
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)
PY
status=0
"$script" --nproc 4 --rate ${rate_mbit}mbit --across 2:10mbit --master-port $port -- "$python" "$work/across.py" \
  >"$work/out" 2>"$work/err" || status=$?
((status == 0)) || fail "--across run exited with $status: $(cat "$work/err")"
expect_no_leftovers "--across run"
for pair in "1 $rate_mbit" "2 10"; do
  read -r sender expected <<<"$pair"
  mbit=$(sed -n "s/^\[rank 0\] from rank $sender: \([0-9.]*\) Mbit\/s$/\1/p" "$work/out")
  [[ -n $mbit ]] || fail "--across: rank 0 reported no rate from rank $sender: $(cat "$work/out")"
  awk -v m="$mbit" -v r="$expected" 'BEGIN { exit !(m >= 0.70 * r && m <= 1.05 * r) }' ||
    fail "--across: rank 0 received from rank $sender at $mbit Mbit/s, outside 70%..105% of $expected Mbit/s"
done
echo "ok: --across 2:10mbit: $(grep -c 'from rank' "$work/out") senders at their group's rate"

# ---- a failing rank stops the others -----------------------------------------------------------

# Rank FAILING (if any) fails; the others write their PID and sleep for a minute, and rank 2
# ignores SIGTERM.
cat >"$work/fail.py" <<'PY'
import os, signal, sys, time

rank, pid_dir, failing = int(os.environ["RANK"]), sys.argv[1], int(sys.argv[2])
if rank == failing:
    time.sleep(0.3)
    print("failing on purpose", flush=True)
    sys.exit(3)
if rank == 2:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(f"{pid_dir}/rank{rank}.pid", "w") as f:
    f.write(str(os.getpid()))
time.sleep(60)
PY

mkdir "$work/fail"
status=0
run_start=$SECONDS
"$script" --nproc 3 --rate 10mbit --grace 1 -- "$python" "$work/fail.py" "$work/fail" 1 \
  >"$work/out" 2>"$work/err" || status=$?
((status == 3)) || fail "failing rank: expected exit 3, got $status: $(cat "$work/err")"
((SECONDS - run_start < 20)) || fail "failing rank: the others were not stopped promptly"
grep -q "rank 1 exited with status 3: stopping the other ranks" "$work/err" ||
  fail "failing rank: no message about stopping the others: $(cat "$work/err")"
grep -q "sending SIGKILL" "$work/err" || fail "failing rank: rank 2 ignores SIGTERM but no SIGKILL was sent"
pids_dead "$work"/fail/rank{0,2}.pid || fail "failing rank: ranks 0 and 2 still run"
expect_no_leftovers "failing rank"
echo "ok: a failing rank (exit 3) made the script exit 3 and stop the others"

# ---- SIGTERM to the script stops the ranks -----------------------------------------------------

mkdir "$work/term"
# exec: the PID written is the script's own, whatever bash does with background jobs.
bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$work/term/script.pid" \
  "$script" --nproc 2 --rate 10mbit --grace 1 -- "$python" "$work/fail.py" "$work/term" -1 \
  >"$work/out" 2>"$work/err" &
waiter=$!
for _ in $(seq 100); do
  [[ -s $work/term/rank0.pid && -s $work/term/rank1.pid ]] && break
  sleep 0.1
done
[[ -s $work/term/rank0.pid && -s $work/term/rank1.pid ]] || fail "SIGTERM: the ranks never started"
kill -TERM "$(<"$work/term/script.pid")"
status=0
wait "$waiter" || status=$?
if ((status != 143)); then
  fail "SIGTERM: expected exit 143, got $status: $(cat "$work/err")"
fi
pids_dead "$work"/term/rank{0,1}.pid || fail "SIGTERM: the ranks still run"
expect_no_leftovers "SIGTERM"
echo "ok: SIGTERM to the script stopped the ranks and removed the network"

# ---- --host-address: ranks reach a server on the host ------------------------------------------

# The host serves on every interface; each rank fetches a page from NETNS_HOST_ADDR. Without
# --host-address the variable is unset (and nothing on the host is reachable).
host_port=$((port + 1))
"$python" -m http.server "$host_port" --bind 0.0.0.0 --directory "$work" >/dev/null 2>&1 &
server=$!
cat >"$work/fetch.py" <<PY
import os, time, urllib.request
address = os.environ.get("NETNS_HOST_ADDR")
if address is None:
    print("no NETNS_HOST_ADDR", flush=True)
else:
    for attempt in range(50):  # the server may still be starting
        try:
            print("fetched", urllib.request.urlopen(f"http://{address}:$host_port/fetch.py", timeout=5).status, address, flush=True)
            break
        except OSError:
            time.sleep(0.1)
PY
status=0
"$script" --nproc 2 --rate 10mbit --host-address -- "$python" "$work/fetch.py" >"$work/out" 2>"$work/err" || status=$?
"$script" --nproc 1 --rate 10mbit -- "$python" "$work/fetch.py" >"$work/out-plain" 2>>"$work/err" || status=$?
kill "$server"
((status == 0)) || fail "--host-address: exited with $status: $(cat "$work/err")"
for rank in 0 1; do
  grep -Eq "^\[rank $rank\] fetched 200 10\.213\.[0-9]+\.254$" "$work/out" ||
    fail "--host-address: rank $rank did not reach the host: $(cat "$work/out")"
done
grep -q "^\[rank 0\] no NETNS_HOST_ADDR$" "$work/out-plain" || fail "without --host-address NETNS_HOST_ADDR is set"
expect_no_leftovers "--host-address"
echo "ok: with --host-address both ranks reached a server on the host at NETNS_HOST_ADDR"

echo "PASS ($((SECONDS - start)) s)"
