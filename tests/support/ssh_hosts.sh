#!/bin/sh
# Hosts for the launch-ssh and launch-mpi tests: an OpenSSH server on loopback, and,
# where this machine allows it (root, iproute2), hosts in network namespaces with
# addresses of their own, each running its own sshd. The namespaces share this
# machine's files and process ids, so cinfer-worker runs there from the build tree and
# a test can watch its processes; only the network is separate.
#
#   ssh_hosts.sh up DIR N       # loopback sshd + N namespace hosts; writes DIR/hosts
#   ssh_hosts.sh down DIR       # stops the sshds, removes the namespaces
#
# DIR/hosts: one line per host "NAME ADDRESS NAMESPACE" (NAMESPACE "-" for loopback).
# DIR/ssh_config: the client settings (key, port, no host-key prompts) for ssh -F.
# DIR/ssh_config_nokey: the same without the key (a refused key).
# DIR/SKIP: why namespace hosts could not be made (loopback only then).
# Exits non-zero (with the reason) when not even the loopback sshd starts.
set -eu
cmd=$1
dir=$2

down() {
    for pidfile in "$dir"/sshd-*.pid; do
        [ -f "$pidfile" ] && kill "$(cat "$pidfile")" 2>/dev/null || true
    done
    if [ -f "$dir/namespaces" ]; then
        while read -r ns; do
            ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
            ip netns del "$ns" 2>/dev/null || true
            ip link del "v${ns#cinfer-}" 2>/dev/null || true
        done <"$dir/namespaces"
        rm -f "$dir/namespaces"
    fi
    if [ -f "$dir/ip_forward" ]; then  # as it was before
        sysctl -qw net.ipv4.ip_forward="$(cat "$dir/ip_forward")" 2>/dev/null || true
        rm -f "$dir/ip_forward"
    fi
}

if [ "$cmd" = down ]; then
    down
    exit 0
fi

n=${3:-0}
mkdir -p "$dir" /run/sshd
rm -f "$dir/hosts" "$dir/SKIP"
sshd=$(command -v sshd || echo /usr/sbin/sshd)
[ -x "$sshd" ] || { echo "no sshd (Debian: apt-get install openssh-server)"; exit 1; }
[ -f "$dir/client_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$dir/client_key"
[ -f "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key"
cp "$dir/client_key.pub" "$dir/authorized_keys"
port=$((20000 + $$ % 20000))

start_sshd() {  # start_sshd NAME ADDRESS PORT [NAMESPACE]
    cat >"$dir/sshd-$1.conf" <<EOF
Port $3
ListenAddress $2
HostKey $dir/host_key
PidFile $dir/sshd-$1.pid
AuthorizedKeysFile $dir/authorized_keys
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
LogLevel ERROR
EOF
    if [ -n "${4:-}" ]; then
        ip netns exec "$4" "$sshd" -f "$dir/sshd-$1.conf"
    else
        "$sshd" -f "$dir/sshd-$1.conf"
    fi
}

cat >"$dir/ssh_config" <<EOF
Host *
  Port $port
  IdentityFile $dir/client_key
  IdentitiesOnly yes
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  LogLevel ERROR
EOF
grep -v -e IdentityFile -e IdentitiesOnly "$dir/ssh_config" >"$dir/ssh_config_nokey"
echo "  IdentityFile /nonexistent" >>"$dir/ssh_config_nokey"

start_sshd loopback 127.0.0.1 "$port"
echo "loopback 127.0.0.1 -" >>"$dir/hosts"

# Namespace hosts: a veth pair each, 10.X.I.1 on this side, 10.X.I.2 inside. Hosts
# reach each other through this machine (MPI ranks talk directly), so it forwards
# while they exist; down puts the setting back.
# A run that was killed before its "down" leaves its namespaces and veths behind; a
# later run whose X were the same would route to them and find no sshd. So X is one no
# address here uses yet, and leftovers are removed: namespaces of ours with no process
# left in them (a live one runs its sshd) made over a minute ago (not one another run is
# setting up right now).
now=$(date +%s)
for ns in $(ip netns list 2>/dev/null | sed -n 's/^\(cinfer-[0-9]*-[0-9]*\).*/\1/p'); do
    made=$(stat -c %Y "/run/netns/$ns" 2>/dev/null || echo "$now")
    if [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && [ $((now - made)) -gt 60 ]; then
        ip netns del "$ns" 2>/dev/null || true
        ip link del "v${ns#cinfer-}" 2>/dev/null || true
    fi
done
subnet=$((100 + $$ % 100))
tries=0
while ip -4 addr 2>/dev/null | grep -q "inet 10\.$subnet\." && [ "$tries" -lt 100 ]; do
    subnet=$((100 + (subnet - 99) % 100))
    tries=$((tries + 1))
done
i=1
: >"$dir/namespaces"
while [ "$i" -le "$n" ]; do
    ns="cinfer-$$-$i"
    if ! ip netns add "$ns" 2>"$dir/netns.err"; then
        echo "cannot make network namespaces here: $(cat "$dir/netns.err")" >"$dir/SKIP"
        break
    fi
    echo "$ns" >>"$dir/namespaces"
    if [ ! -f "$dir/ip_forward" ]; then
        cat /proc/sys/net/ipv4/ip_forward >"$dir/ip_forward"
        sysctl -qw net.ipv4.ip_forward=1 || true
    fi
    outer="v$$-$i"
    ip link add "$outer" type veth peer name eth0 netns "$ns"
    ip addr add "10.$subnet.$i.1/24" dev "$outer"
    ip link set "$outer" up
    ip netns exec "$ns" ip addr add "10.$subnet.$i.2/24" dev eth0
    ip netns exec "$ns" ip link set eth0 up
    ip netns exec "$ns" ip link set lo up
    # this machine's other addresses (the main process's, seen from another host) via it
    ip netns exec "$ns" ip route add default via "10.$subnet.$i.1"
    start_sshd "h$i" "10.$subnet.$i.2" "$port" "$ns"
    echo "h$i 10.$subnet.$i.2 $ns" >>"$dir/hosts"
    i=$((i + 1))
done

# Every sshd answers before the test starts.
while read -r name address ns; do
    tries=0
    until ssh -F "$dir/ssh_config" -o BatchMode=yes -o ConnectTimeout=2 "$address" true 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -lt 50 ] || { echo "sshd of $name ($address) does not answer"; down; exit 1; }
        sleep 0.1
    done
done <"$dir/hosts"
echo "ssh hosts up: $(wc -l <"$dir/hosts") ($(cut -d' ' -f1,2 "$dir/hosts" | tr '\n' ' '))"
