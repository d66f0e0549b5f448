#!/bin/bash
# Runs README command 2 (./tests/run-all.sh) the way a new user would: on a brand-new Debian 12
# root made here with debootstrap (minbase: nothing installed beyond apt and the essentials), with
# this source tree unpacked in it, as root, in a mount namespace of its own where / is a mount
# point and proc, sysfs, cgroup2, /dev and a private /run and /dev/shm are mounted.
#
#   tests/fresh-debian.sh [--keep] [DIR]
#
# DIR (default: a new folder under /var/tmp) holds the root; it is removed at the end unless
# --keep is given. Takes ~25 minutes (debootstrap ~2, the packages ~4, the suite ~18).
# Not part of the suite: it needs the network to Debian's archive and ~3 GB of disk.
# The last line is the suite's own "N passed, N failed, N skipped", prefixed with "fresh-debian:".
set -u
cd "$(dirname "$0")/.."
src=$PWD

keep=0
if [ "${1:-}" = --keep ]; then
        keep=1
        shift
fi
if [ "$(id -u)" != 0 ]; then
        echo "fresh-debian: must run as root (debootstrap, chroot, mounts)" >&2
        exit 1
fi
for tool in debootstrap unshare chroot; do
        if ! command -v "$tool" >/dev/null; then
                echo "fresh-debian: $tool is missing: apt-get install -y debootstrap util-linux coreutils" >&2
                exit 1
        fi
done

dir=${1:-$(mktemp -d /var/tmp/profd-fresh.XXXXXX)}
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd)
root=$dir/root
log=$dir/run-all.log
mirror=${PROFD_DEBIAN_MIRROR:-http://deb.debian.org/debian}

cleanup() {
        # Every mount lives in the namespace, which is gone once its processes are; anything still
        # running from the root (a test that leaked a process) is reported and stopped.
        local leaked
        leaked=$(for p in /proc/[0-9]*; do
                [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ] && echo "${p#/proc/}"
        done)
        if [ -n "$leaked" ]; then
                echo "fresh-debian: processes left running in the root: $(echo $leaked)" >&2
                # shellcheck disable=SC2086
                kill -9 $leaked 2>/dev/null
        fi
        if [ "$keep" = 0 ] && ! grep -q " $root[/ ]" /proc/self/mountinfo; then
                rm -rf --one-file-system "$dir"
        fi
}
trap cleanup EXIT

echo "fresh-debian: debootstrap bookworm (minbase) into $root"
if [ ! -x "$root/usr/bin/apt-get" ]; then
        debootstrap --variant=minbase bookworm "$root" "$mirror" >"$dir/debootstrap.log" 2>&1 || {
                tail -n 20 "$dir/debootstrap.log"
                echo "fresh-debian: debootstrap failed"
                exit 1
        }
fi
# What a freshly installed Debian 12 has: the release, its updates and security suites.
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

echo "fresh-debian: copying the source tree to /root/profd in the root"
rm -rf "$root/root/profd"
mkdir -p "$root/root/profd"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
        # Tracked and new files as they are in the working tree (not build folders or caches).
        git -C "$src" ls-files -z --cached --others --exclude-standard |
                (cd "$src" && xargs -0 tar -c --ignore-failed-read 2>/dev/null) | tar -x -C "$root/root/profd"
else
        tar -C "$src" --exclude='./build*' -c . | tar -x -C "$root/root/profd"
fi

# In the root: command 2 as written; then command 1 as written, in the background, and the README's
# "Then:" block as written against it (the profile and flame graph files must come back valid).
cat >"$root/root/fresh-inner.sh" <<'EOS'
#!/bin/bash
cd /root/profd || exit 1
./tests/run-all.sh
rc=$?
echo "fresh-debian: command 2 exited $rc"
cmd1=$(awk '/^# 1\./ { getline; print; exit }' README.md)
then=$(awk '/^Then/ { f = 1 } f && /^```sh/ { g = 1; next } g && /^```/ { exit } g' README.md)
echo "fresh-debian: README command 1: $cmd1"
setsid bash -c "$cmd1" >/root/command1.log 2>&1 </dev/null &
up=0
for _ in $(seq 1 600); do
        if (exec 3<>/dev/tcp/127.0.0.1/7071) 2>/dev/null; then up=1; break; fi
        sleep 1
done
then_rc=1
if [ "$up" = 1 ]; then
        echo "fresh-debian: profd is serving; the README's Then: block:"
        echo "$then"
        mkdir -p /root/then && cd /root/then && bash -e -c "$then" >/root/then.log 2>&1
        then_rc=$?
        tail -n 15 /root/then.log
        gzip -t /root/then/cpu.pb.gz 2>/dev/null || then_rc=1
        grep -q '<svg\|<html' /root/then/fg.html 2>/dev/null || then_rc=1
else
        echo "fresh-debian: README command 1 did not serve :7071 within 10 minutes:"
        tail -n 20 /root/command1.log
fi
pkill -TERM -f build/daemon/profd
sleep 2
tail -n 5 /root/command1.log
echo "fresh-debian: README Then: block $([ "$then_rc" = 0 ] && echo ok || echo FAILED)"
[ "$rc" = 0 ] && [ "$then_rc" = 0 ]
EOS
chmod +x "$root/root/fresh-inner.sh"

echo "fresh-debian: running ./tests/run-all.sh in the root (log: $log)"
# Own mount namespace; / is a bind mount of the root (a mount point, as on a real machine).
unshare --mount --propagation private -- /bin/bash -c '
        set -e
        root=$1
        mount --bind "$root" "$root"
        mount -t proc proc "$root/proc"
        mount -t sysfs sysfs "$root/sys"
        mount -t cgroup2 cgroup2 "$root/sys/fs/cgroup"
        mount -t bpf bpf "$root/sys/fs/bpf" 2>/dev/null || true
        mount --rbind /dev "$root/dev"
        mount -t tmpfs tmpfs "$root/dev/shm"
        mount -t tmpfs -o mode=755 tmpfs "$root/run"
        set +e
        exec chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
                HOME=/root TERM=dumb LANG=C.UTF-8 /root/fresh-inner.sh
' fresh-debian "$root" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
readme=$(grep -E '^fresh-debian: README Then: block' "$log" | tail -n 1)
echo "fresh-debian: ${summary:-no test summary}; ${readme#fresh-debian: }"
exit "$status"
