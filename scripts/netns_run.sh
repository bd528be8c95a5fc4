#!/usr/bin/env bash
# Runs N ranks of a command over genuinely rate-limited links on one machine: each rank gets its
# own network namespace, joined to the others through a private bridge by a veth pair, and both
# directions of every rank's link are shaped with `tc ... tbf`. Removes exactly what it created,
# also on failure, Ctrl-C and SIGTERM. See usage() below and docs/slow-links.md.

# The functions that only the EXIT trap calls look unreachable to shellcheck.
# shellcheck disable=SC2317

set -euo pipefail

readonly prog=netns_run
readonly max_nproc=64
readonly ifname_max=15      # IFNAMSIZ - 1
readonly mtu_frame=1514     # largest non-GSO frame on the veth (1500 MTU + Ethernet header)

usage() {
  cat <<'EOF'
Usage: scripts/netns_run.sh --nproc N --rate RATE [options] -- COMMAND [ARGS...]
       scripts/netns_run.sh --check [--nproc N] --rate RATE [options]

Runs N copies of COMMAND, rank i in its own network namespace, all joined through a private
bridge by veth pairs. Each rank's link is shaped with a tc tbf qdisc in BOTH directions:
egress of the rank-side veth (its uplink) and egress of the bridge-side veth (its downlink), so
every rank can send at most RATE and receive at most RATE. Needs root.

Rank i runs in the current directory with:
  RANK=i LOCAL_RANK=i WORLD_SIZE=N LOCAL_WORLD_SIZE=N
  MASTER_ADDR=<rank 0's address>  MASTER_PORT=<--master-port>
  LOCO_SOCKET_IFNAME=<rank i's interface in its namespace> (GLOO_SOCKET_IFNAME is set to the same)
  NETNS_HOST_ADDR=<the host's address on the bridge> (with --host-address only)
Output (stdout and stderr together) is forwarded line by line as "[rank i] ...". The script
exits with the first non-zero exit status of any rank (0 if all succeed); when a rank fails, the
others get SIGTERM and, after --grace seconds, SIGKILL.

Options:
  --nproc N          number of ranks, 1..64 (--check: default 2)
  --rate RATE        link rate in tc units: bit, kbit, mbit or gbit (e.g. 100mbit, 1gbit)
  --burst BYTES      tbf bucket size; default: the bytes sent in 4 ms at RATE, at least 8 KiB
  --limit BYTES      tbf queue length; default: the bytes sent in 50 ms at RATE, at least 128 KiB
                     (BYTES: a number with an optional k or m suffix, in KiB or MiB)
  --across SIZE:RATE ranks form groups of SIZE consecutive ranks (rank i in group i / SIZE): links
                     between ranks of different groups run at RATE, links within a group at --rate
                     (e.g. --nproc 4 --rate 1gbit --across 2:10mbit: two pipeline replicas of two
                     stages, 1 Gbit/s between a replica's stages, 10 Mbit/s between the replicas).
                     Each rank's uplink and downlink get an htb qdisc with one class per rate, the
                     other groups' addresses sorted into the slow one by u32 filters
  --master-port P    MASTER_PORT (default 29500)
  --grace S          seconds between SIGTERM and SIGKILL when stopping ranks (default 5)
  --host-address     also give the host's end of the bridge an address (SUBNET.254, passed to the
                     ranks as NETNS_HOST_ADDR), so that ranks reach a server on the host, such as
                     a `loco coordinator` listening on 0.0.0.0, over their shaped links
  --check            instead of a command, measure the achieved rate: ranks 1..N-1 send to rank 0
                     over TCP for about --check-seconds and rank 0 prints the Mbit/s it received;
                     fails (exit 1) unless that is within 70%..105% of RATE
  --check-seconds S  length of the --check transfer (default 2)
  -h, --help         this help

Latency is NOT emulated: this kernel has no netem qdisc, so the links have the veth/bridge
latency of one machine (tens of microseconds). loco emulates latency in-process with its link
model (--latency-ms of loco bench allreduce). --latency/--delay are rejected rather than silently ignored.

Exit status: a rank's status as above; 2 when this machine cannot run it (not root, ip/tc
missing, no tbf, namespaces not permitted); 64 for a usage error.
EOF
}

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
usage_error() { log "$*"; log "see --help"; exit 64; }
cannot_run() { log "$*"; exit 2; }

# ---- arguments ---------------------------------------------------------------------------------

nproc=""
rate=""
across=""
burst=""
limit=""
master_port=29500
grace=5
check=0
host_address=""  # 1 with --host-address
check_seconds=2
command=()

# A byte count with an optional k/m suffix (KiB/MiB), printed in bytes.
parse_bytes() {
  local text=$1 option=$2
  [[ $text =~ ^([0-9]+)([kKmM]?)$ ]] || usage_error "$option: '$text' is not a byte count (e.g. 65536, 64k, 1m)"
  local n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[2],,}
  case $unit in
    k) n=$((n * 1024)) ;;
    m) n=$((n * 1024 * 1024)) ;;
  esac
  ((n > 0)) || usage_error "$option must be positive"
  echo "$n"
}

# A tc rate with a bit unit, printed in bits per second.
parse_rate_bps() {
  local text=${1,,}
  [[ $text =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit)$ ]] ||
    usage_error "--rate: '$1' is not a rate like 500kbit, 100mbit or 1gbit (bytes-per-second units such as mbps are not accepted, to avoid confusion)"
  local scale
  case ${BASH_REMATCH[3]} in
    bit) scale=1 ;;
    kbit) scale=1000 ;;
    mbit) scale=1000000 ;;
    gbit) scale=1000000000 ;;
  esac
  local bps
  bps=$(awk -v n="${BASH_REMATCH[1]}" -v s="$scale" 'BEGIN { printf "%.0f", n * s }')
  ((bps >= 8000)) || usage_error "--rate: $1 is below 8kbit"
  echo "$bps"
}

while (($#)); do
  case $1 in
    --nproc) nproc=${2-}; shift 2 || usage_error "--nproc needs a value" ;;
    --rate) rate=${2-}; shift 2 || usage_error "--rate needs a value" ;;
    --burst) burst=${2-}; shift 2 || usage_error "--burst needs a value" ;;
    --across) across=${2-}; shift 2 || usage_error "--across needs a value" ;;
    --limit) limit=${2-}; shift 2 || usage_error "--limit needs a value" ;;
    --master-port) master_port=${2-}; shift 2 || usage_error "--master-port needs a value" ;;
    --grace) grace=${2-}; shift 2 || usage_error "--grace needs a value" ;;
    --host-address) host_address=1; shift ;;
    --check) check=1; shift ;;
    --check-seconds) check_seconds=${2-}; shift 2 || usage_error "--check-seconds needs a value" ;;
    --latency | --latency=* | --delay | --delay=* | --netem | --netem=*)
      usage_error "$1: latency cannot be emulated here (this kernel has no netem qdisc); use loco's in-process link model (--latency-ms of loco bench allreduce) instead" ;;
    -h | --help) usage; exit 0 ;;
    --) shift; command=("$@"); break ;;
    *) usage_error "unknown argument '$1' (the command goes after --)" ;;
  esac
done

if ((check)); then
  ((${#command[@]} == 0)) || usage_error "--check takes no command"
  nproc=${nproc:-2}
  [[ $check_seconds =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "--check-seconds must be a number"
else
  ((${#command[@]} > 0)) || usage_error "no command given (put it after --)"
fi
[[ -n $nproc ]] || usage_error "--nproc is required"
if ! [[ $nproc =~ ^[0-9]+$ ]] || ((nproc < 1 || nproc > max_nproc)); then
  usage_error "--nproc must be 1..$max_nproc"
fi
((check == 0 || nproc >= 2)) || usage_error "--check needs --nproc 2 or more"
[[ -n $rate ]] || usage_error "--rate is required"
rate_bps=$(parse_rate_bps "$rate")
across_size=0
across_bps=0
if [[ -n $across ]]; then
  [[ $across =~ ^([1-9][0-9]*):(.+)$ ]] || usage_error "--across: '$across' is not SIZE:RATE (e.g. 2:10mbit)"
  across_size=${BASH_REMATCH[1]}
  across_bps=$(parse_rate_bps "${BASH_REMATCH[2]}")
  ((across_size >= 1 && across_size < nproc)) ||
    usage_error "--across: groups of $across_size ranks must be 1 to --nproc - 1 ranks (one group: every link is --rate)"
  ((check == 0)) || usage_error "--check measures one rate: check --rate and the --across rate in two runs"
fi
if ! [[ $master_port =~ ^[0-9]+$ ]] || ((master_port < 1 || master_port > 65535)); then
  usage_error "--master-port must be 1..65535"
fi
[[ $grace =~ ^[0-9]+(\.[0-9]+)?$ ]] || usage_error "--grace must be a number of seconds"

# tbf sizing (bytes). The bucket must cover the sender's wake-up jitter: a bucket smaller than
# RATE x (timer + scheduling delay) loses tokens while the qdisc waits and caps throughput below
# RATE at high rates; a big one lets a line-rate burst through at low rates. 4 ms at RATE, at
# least 8 KiB (a few frames), measured to keep 10 mbit..1 gbit within a few % (docs/slow-links.md).
# The queue holds 50 ms at RATE, at least 128 KiB and 3 buckets: with several senders converging
# on one rank (fan-in), a queue of only a few dozen frames drops so often that TCP stalls in
# retransmission timeouts (10 mbit, 3 senders, 25 KB queue: 69..96% of RATE; 128 KiB: 93..97%).
default_burst() {  # bytes, for a rate in bit/s
  local bytes=$(($1 * 4 / 8000))
  echo $((bytes >= 8192 ? bytes : 8192))
}
default_limit() {  # bytes, for a rate in bit/s and its burst
  local bytes=$(($1 * 50 / 8000))
  ((bytes >= 131072)) || bytes=131072
  echo $((bytes >= 3 * $2 ? bytes : 3 * $2))
}
if [[ -n $burst ]]; then
  burst=$(parse_bytes "$burst" --burst)
else
  burst=$(default_burst "$rate_bps")
fi
((burst >= mtu_frame)) || usage_error "--burst must be at least $mtu_frame bytes (one full frame)"
if [[ -n $limit ]]; then
  limit=$(parse_bytes "$limit" --limit)
else
  limit=$(default_limit "$rate_bps" "$burst")
fi
across_burst=$(default_burst "$across_bps")
across_limit=$(default_limit "$across_bps" "$across_burst")

# ---- can this machine do it? -------------------------------------------------------------------

((BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1))) ||
  cannot_run "needs bash 5.1 or newer (wait -n -p), this is $BASH_VERSION"
((EUID == 0)) || cannot_run "needs root (network namespaces, veth, bridge and tc need CAP_NET_ADMIN); run it with sudo"
for tool in ip tc; do
  command -v "$tool" >/dev/null || cannot_run "'$tool' not found: install the Debian package iproute2 (apt-get install iproute2)"
done
command -v setsid >/dev/null || cannot_run "'setsid' not found: install the Debian package util-linux"
if ((check)); then
  [[ -x /usr/bin/python3 ]] || cannot_run "--check needs /usr/bin/python3 (Debian package python3)"
fi

# ---- names and addresses -----------------------------------------------------------------------

# Everything created carries this run's tag: the script's PID and a random suffix of fixed
# length (so "<pid><suffix>" reads back unambiguously), e.g. lb12345a3f, lh12345a3f-0.
new_tag() { printf '%d%03x' "$$" $((RANDOM % 4096)); }
bridge_name() { echo "lb$tag"; }
host_veth_name() { echo "lh$tag-$1"; }  # bridge side, in the host namespace
rank_veth_name() { echo "lr$tag-$1"; }  # rank side, inside namespace i
netns_name() { echo "loco-$tag-$1"; }

netns_exists() { [[ -e /var/run/netns/$1 ]]; } # where `ip netns add` mounts them
link_exists() { ip link show dev "$1" >/dev/null 2>&1; }

names_are_free() {
  local i
  link_exists "$(bridge_name)" && return 1
  for ((i = 0; i < nproc; i++)); do
    link_exists "$(host_veth_name "$i")" && return 1
    netns_exists "$(netns_name "$i")" && return 1
  done
  return 0
}

tag=""
for _ in 1 2 3 4 5 6 7 8; do
  tag=$(new_tag)
  names_are_free && break
  tag=""
done
[[ -n $tag ]] || cannot_run "could not find unused interface/namespace names"
for name in "$(bridge_name)" "$(host_veth_name $((nproc - 1)))" "$(rank_veth_name $((nproc - 1)))"; do
  ((${#name} <= ifname_max)) || cannot_run "interface name '$name' is longer than $ifname_max characters"
done

ip_to_int() {
  local IFS=.
  # shellcheck disable=SC2086  # splitting the dotted quad is the point
  set -- $1
  echo $((($1 << 24) | ($2 << 16) | ($3 << 8) | $4))
}

# Does a.b.c.d/len overlap the /24 that starts at $2 (an integer)? Prefixes shorter than /16
# (default routes, 10.0.0.0/8 aggregates) are not counted as "using" our range: the ranks talk
# only over the private bridge, which no host route reaches.
prefix_overlaps() {
  local cidr=$1 net24=$2 addr len
  addr=${cidr%/*}
  len=${cidr#*/}
  [[ $cidr == */* ]] || len=32
  [[ $addr =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
  ((len >= 16)) || return 1
  local common=$((len < 24 ? len : 24))
  local mask=$(((0xffffffff << (32 - common)) & 0xffffffff))
  (((($(ip_to_int "$addr")) & mask) == (net24 & mask)))
}

# The host's IPv4 addresses and route destinations (the first field that looks like one: route
# lines may start with a type such as "local" or "broadcast").
mapfile -t host_prefixes < <({
  ip -4 -o addr show | awk '{print $4}'
  ip -4 route show table all |
    awk '{ for (f = 1; f <= 3; f++) if ($f ~ /^[0-9.]+(\/[0-9]+)?$/) { print $f; break } }'
})

subnet_in_use() {
  local net24 prefix
  net24=$(ip_to_int "10.213.$1.0")
  for prefix in "${host_prefixes[@]}"; do
    prefix_overlaps "$prefix" "$net24" && return 0
  done
  return 1
}

subnet=""
for ((k = 0; k < 256; k++)); do
  octet=$((($$ + k) % 256))
  if ! subnet_in_use "$octet"; then
    subnet=10.213.$octet
    break
  fi
done
[[ -n $subnet ]] || cannot_run "every 10.213.x.0/24 is in use on this host"
rank_addr() { echo "$subnet.$(($1 + 1))"; }
host_addr() { echo "$subnet.254"; }  # ranks are .1 to .64

# ---- cleanup: exactly what this run created ----------------------------------------------------

# Recorded BEFORE each creation (the names were checked to be free and carry our tag), so an
# interruption between creating and recording cannot leak anything.
created_netns=()
created_links=()
rank_pids=()
prefixer_pids=()
tmp_dir=""

now_us() { echo "${EPOCHREALTIME/./}"; }
before() { (($(now_us) < $1)); }
deadline_in() { echo $(($(now_us) + $(awk -v s="$1" 'BEGIN { printf "%.0f", s * 1e6 }'))); }

# Processes of our ranks: their process groups (setsid) and anything inside our namespaces.
# (rank_pids are the subshells that wait for the ranks: alive while their rank is.)
signal_ranks() {
  local sig=$1 pid ns pgid_file rank
  for ((rank = 0; rank < ${#rank_pids[@]}; rank++)); do
    pgid_file=$tmp_dir/rank$rank.pgid
    if [[ -s $pgid_file ]]; then
      kill -s "$sig" -- "-$(<"$pgid_file")" 2>/dev/null || true
    fi
  done
  for ns in "${created_netns[@]}"; do
    netns_exists "$ns" || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      kill -s "$sig" "$pid" 2>/dev/null || true
    done
  done
}

ranks_alive() {
  local pid ns
  for pid in "${rank_pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && return 0
  done
  for ns in "${created_netns[@]}"; do
    netns_exists "$ns" || continue
    [[ -n $(ip netns pids "$ns" 2>/dev/null) ]] && return 0
  done
  return 1
}

stop_ranks() {
  ranks_alive || return 0
  signal_ranks TERM
  local deadline
  deadline=$(deadline_in "$grace")
  while ranks_alive && before "$deadline"; do sleep 0.1; done
  if ranks_alive; then
    log "ranks still running ${grace}s after SIGTERM: sending SIGKILL"
    signal_ranks KILL
    deadline=$(deadline_in 5)
    while ranks_alive && before "$deadline"; do sleep 0.1; done
  fi
}

# The prefixers end when the last writer of their FIFO is gone; give them a moment to drain.
stop_prefixers() {
  local pid deadline
  deadline=$(deadline_in 2)
  for pid in "${prefixer_pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && before "$deadline"; do sleep 0.05; done
    kill -s KILL "$pid" 2>/dev/null || true
  done
}

cleanup() {
  local status=$? name leftovers=()
  set +e
  trap '' INT TERM HUP # a second Ctrl-C must not interrupt the cleanup
  stop_ranks
  stop_prefixers
  # Deleting the bridge-side veth deletes its peer in the rank's namespace too.
  for ((k = ${#created_links[@]} - 1; k >= 0; k--)); do
    name=${created_links[k]}
    link_exists "$name" && ip link del dev "$name"
  done
  for name in "${created_netns[@]}"; do
    netns_exists "$name" && ip netns del "$name"
  done
  [[ -n $tmp_dir ]] && rm -rf -- "$tmp_dir"
  for name in "${created_links[@]}"; do
    link_exists "$name" && leftovers+=("link $name")
  done
  for name in "${created_netns[@]}"; do
    netns_exists "$name" && leftovers+=("netns $name")
  done
  if ((${#leftovers[@]})); then
    log "could not remove: ${leftovers[*]}"
    ((status != 0)) || status=1
  fi
  exit "$status"
}

trap cleanup EXIT
trap 'log "interrupted (SIGINT): stopping ranks and cleaning up"; exit 130' INT
trap 'log "terminated (SIGTERM): stopping ranks and cleaning up"; exit 143' TERM
trap 'log "hangup (SIGHUP): stopping ranks and cleaning up"; exit 129' HUP

# ---- the network -------------------------------------------------------------------------------

# Runs one batch of ip or tc commands read from stdin (one process instead of one per command:
# process start-up dominates the set-up time); on failure names the likely cause and exits 2
# (the EXIT trap removes whatever was already created).
setup() {
  local err
  if ! err=$("$@" -batch - 2>&1); then
    log "setup failed ($*): $err"
    case $err in
      *"Specified qdisc kind is unknown"* | *"Unknown qdisc"*)
        cannot_run "the tbf qdisc (or, with --across, htb and pfifo) is not available in this kernel (CONFIG_NET_SCH_TBF, CONFIG_NET_SCH_HTB)" ;;
      *"classifier not found"*)
        cannot_run "--across needs the u32 classifier (CONFIG_NET_CLS_U32), which this kernel lacks" ;;
      *"Operation not permitted"* | *"Permission denied"*)
        cannot_run "not permitted to create network namespaces/interfaces here (needs CAP_NET_ADMIN, e.g. a container without it)" ;;
      *) cannot_run "could not set up the network" ;;
    esac
  fi
}

bridge=$(bridge_name)
tbf="root tbf rate ${rate_bps}bit burst $burst limit $limit"

# The tc batch that shapes the egress of `dev`, rank i's link one way: its uplink (`match` dst: where
# its packets go) or its downlink (`match` src: where they come from). Without --across one tbf; with it
# an htb class per rate, the other groups' ranks filtered into the --across one.
shaping() {
  local dev=$1 i=$2 match=$3 j
  if ((across_size == 0)); then
    echo "qdisc add dev $dev $tbf"
    return
  fi
  echo "qdisc add dev $dev root handle 1: htb default 1"
  echo "class add dev $dev parent 1: classid 1:1 htb rate ${rate_bps}bit ceil ${rate_bps}bit burst $burst cburst $burst quantum $mtu_frame"
  echo "class add dev $dev parent 1: classid 1:2 htb rate ${across_bps}bit ceil ${across_bps}bit burst $across_burst cburst $across_burst quantum $mtu_frame"
  echo "qdisc add dev $dev parent 1:1 pfifo limit $((limit / mtu_frame + 1))"
  echo "qdisc add dev $dev parent 1:2 pfifo limit $((across_limit / mtu_frame + 1))"
  for ((j = 0; j < nproc; j++)); do
    ((j / across_size == i / across_size)) && continue
    echo "filter add dev $dev parent 1: protocol ip prio 1 u32 match ip $match $(rank_addr "$j")/32 flowid 1:2"
  done
}
host_batch="link add name $bridge type bridge
link set dev $bridge up"
downlinks=""
created_links+=("$bridge")
for ((i = 0; i < nproc; i++)); do
  ns=$(netns_name "$i")
  host_veth=$(host_veth_name "$i")
  created_netns+=("$ns")
  created_links+=("$host_veth")
  host_batch+="
netns add $ns
link add name $host_veth type veth peer name $(rank_veth_name "$i") netns $ns
link set dev $host_veth master $bridge up"
  downlinks+="$(shaping "$host_veth" "$i" src)"$'\n' # downlink: bridge -> rank i
done
# The host's address on the bridge (--host-address): traffic between a rank and the host crosses that
# rank's shaped veth pair like any other.
((host_address)) && host_batch+="
addr add $(host_addr)/24 dev $bridge"
setup ip <<<"$host_batch"
for ((i = 0; i < nproc; i++)); do
  ns=$(netns_name "$i")
  rank_veth=$(rank_veth_name "$i")
  setup ip -n "$ns" <<EOF
link set dev lo up
addr add $(rank_addr "$i")/24 dev $rank_veth
link set dev $rank_veth up
EOF
  setup tc -n "$ns" <<<"$(shaping "$rank_veth" "$i" dst)" # uplink: rank i -> bridge
done
setup tc <<<"$downlinks"

log "$nproc ranks on $subnet.0/24 via bridge $bridge, each link shaped to $rate both ways ($( ((across_size)) && echo "htb" || echo "tbf") burst $burst B, limit $limit B)"
((across_size)) && log "across groups of $across_size ranks: ${across#*:} both ways (htb classes, burst $across_burst B)"
((host_address)) && log "the host is $(host_addr) on the bridge (NETNS_HOST_ADDR)"

# ---- the ranks ---------------------------------------------------------------------------------

tmp_dir=$(mktemp -d "/tmp/$prog.$tag.XXXXXX")

if ((check)); then
  cat >"$tmp_dir/check.py" <<'PY'
# Ranks 1..N-1 each send their share over TCP to rank 0, which reports the rate it received.
import os, socket, sys, threading, time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
rate_bps, seconds = float(sys.argv[1]), float(sys.argv[2])
share = max(1 << 20, int(rate_bps / 8 * seconds / (world - 1)))

if rank == 0:
    server = socket.create_server((addr, port), backlog=world)
    server.settimeout(60)
    spans, lock = [], threading.Lock()

    def receive(conn):
        buf, got, start = bytearray(1 << 20), 0, None
        while n := conn.recv_into(buf):
            start = start or time.monotonic()
            got += n
        end = time.monotonic()
        conn.sendall(b"k")
        conn.close()
        with lock:
            spans.append((start, end, got))

    threads = []
    for _ in range(world - 1):
        conn, _ = server.accept()
        threads.append(threading.Thread(target=receive, args=(conn,)))
        threads[-1].start()
    for t in threads:
        t.join()
    took = max(s[1] for s in spans) - min(s[0] for s in spans)
    total = sum(s[2] for s in spans)
    mbit = total * 8 / took / 1e6
    percent = 100 * mbit * 1e6 / rate_bps
    print(f"received {total} B from {world - 1} sender(s) in {took:.3f} s: "
          f"{mbit:.1f} Mbit/s = {percent:.1f}% of {rate_bps / 1e6:g} Mbit/s", flush=True)
    if not 70 <= percent <= 105:
        sys.exit("check failed: the rate received is outside 70%..105% of the limit")
else:
    deadline = time.monotonic() + 30
    while True:
        try:
            sock = socket.create_connection((addr, port), timeout=30)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    chunk = memoryview(bytes(1 << 20))
    start, left = time.monotonic(), share
    while left:
        sock.sendall(chunk[:min(left, len(chunk))])
        left -= min(left, len(chunk))
    sock.shutdown(socket.SHUT_WR)
    sock.recv(1)
    took = time.monotonic() - start
    print(f"sent {share} B in {took:.3f} s: {share * 8 / took / 1e6:.1f} Mbit/s", flush=True)
PY
  command=(/usr/bin/python3 "$tmp_dir/check.py" "$rate_bps" "$check_seconds")
fi

declare -A rank_of_pid=()
for ((i = 0; i < nproc; i++)); do
  fifo=$tmp_dir/rank$i.out
  mkfifo "$fifo"
  # The prefixer ignores Ctrl-C and SIGTERM so that it forwards what ranks print while they are
  # being stopped; it ends when its FIFO closes (or is killed by stop_prefixers).
  (
    trap '' INT TERM HUP
    exec sed -u "s/^/[rank $i] /" <"$fifo"
  ) &
  prefixer_pids+=("$!")
  # The rank runs under setsid, so it is a process group of its own that stopping reaches with
  # its children; the subshell around it only waits and reports its status, its stderr (bash's
  # "Killed" job notices when ranks are stopped, not the rank's output) going to /dev/null.
  (
    setsid ip netns exec "$(netns_name "$i")" env \
      RANK="$i" LOCAL_RANK="$i" WORLD_SIZE="$nproc" LOCAL_WORLD_SIZE="$nproc" \
      MASTER_ADDR="$(rank_addr 0)" MASTER_PORT="$master_port" \
      LOCO_SOCKET_IFNAME="$(rank_veth_name "$i")" GLOO_SOCKET_IFNAME="$(rank_veth_name "$i")" \
      ${host_address:+NETNS_HOST_ADDR="$(host_addr)"} \
      "${command[@]}" >"$fifo" 2>&1 </dev/null &
    echo "$!" >"$tmp_dir/rank$i.pgid"
    wait "$!"
  ) 2>/dev/null &
  rank_pids+=("$!")
  rank_of_pid[$!]=$i
done

first_failure=0
running=("${rank_pids[@]}")
while ((${#running[@]})); do
  finished=""
  status=0
  wait -n -p finished "${running[@]}" || status=$?
  [[ -n ${finished-} ]] || break
  still=()
  for pid in "${running[@]}"; do
    [[ $pid == "$finished" ]] || still+=("$pid")
  done
  running=("${still[@]}")
  if ((status != 0)); then
    first_failure=$status
    message="rank ${rank_of_pid[$finished]} exited with status $status"
    ((${#running[@]} == 0)) || message+=": stopping the other ranks"
    log "$message"
    break
  fi
done

exit "$first_failure" # the EXIT trap stops the ranks still running and removes the network
