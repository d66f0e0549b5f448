#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only
# Downloads Debian arm64 packages and unpacks them, for the aarch64 unwind-table checks on any
# machine: fetch-arm64-debs.sh CACHE SUITE PACKAGE...
# A private apt configuration (its own sources list, lists and archive cache under
# CACHE/SUITE/apt, APT::Architecture=arm64) leaves the machine's apt setup alone; apt checks each
# .deb against the signed Release/Packages lists (Debian's keyring) before it is kept. The
# packages are unpacked with dpkg -x into CACHE/SUITE/root; a package already unpacked at the
# same version is not downloaded again.
# Exit 77 (skip) only when the Debian mirror cannot be reached; any other failure is an error.
set -eu
cache=$1 suite=$2
shift 2
mirror=${PROFD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
apt_dir=$cache/$suite/apt
root=$cache/$suite/root
mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$root"
printf 'deb [arch=arm64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
        "$mirror" "$suite" >"$apt_dir/sources.list"
apt_opts="-o Dir::Etc::SourceList=$apt_dir/sources.list -o Dir::Etc::SourceParts=/dev/null
 -o Dir::State::Lists=$apt_dir/lists -o Dir::Cache=$apt_dir -o Dir::Cache::archives=$apt_dir/archives
 -o Dir::State::status=/dev/null -o APT::Architecture=arm64 -o APT::Architectures=arm64
 -o Debug::NoLocking=1 -o Acquire::Retries=3"
# apt's words for a mirror it cannot reach (anything else, a bad signature or a hash mismatch
# above all, is a failure, never a skip)
unreachable='Could not resolve\|Temporary failure resolving\|Unable to connect\|Could not connect\|Connection failed\|Connection timed out\|No route to host\|Network is unreachable'
# Lists at most a day old are reused (tests run many times a day; the packages barely change).
if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*_Packages*' -mmin -1440 2>/dev/null | head -n1)" ]; then
        # shellcheck disable=SC2086
        if ! apt-get $apt_opts -q update >"$apt_dir/update.log" 2>&1 ||
                grep -q '^\(E\|W\): ' "$apt_dir/update.log"; then
                if ! grep -q "$unreachable" "$apt_dir/update.log"; then
                        echo "FAIL: apt-get update ($suite, arm64):" >&2
                        grep '^\(E\|W\): ' "$apt_dir/update.log" >&2
                        exit 1
                fi
                if ! ls "$apt_dir/lists/"*_Packages* >/dev/null 2>&1; then
                        echo "SKIP: the Debian mirror $mirror ($suite, arm64) is unreachable:" >&2
                        tail -n 3 "$apt_dir/update.log" >&2
                        exit 77
                fi
                echo "warning: $mirror unreachable, using the lists from an earlier run" >&2
        fi
fi
cd "$apt_dir/archives"
for pkg in "$@"; do
        # shellcheck disable=SC2086
        ver=$(apt-cache $apt_opts show --no-all-versions "$pkg:arm64" | sed -n 's/^Version: //p' | head -n1)
        [ -n "$ver" ] || { echo "$pkg: not in $suite arm64" >&2; exit 1; }
        stamp=$root/.unpacked-$pkg
        [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$ver" ] && continue
        # apt-get download verifies the file against the signed index (size and SHA256)
        # shellcheck disable=SC2086
        apt-get $apt_opts -q download "$pkg:arm64=$ver" >"$apt_dir/download.log" 2>&1 || {
                cat "$apt_dir/download.log" >&2
                if grep -q "$unreachable" "$apt_dir/download.log"; then
                        echo "SKIP: the Debian mirror $mirror is unreachable" >&2
                        exit 77
                fi
                exit 1
        }
        deb=$(ls -t "${pkg}"_*_arm64.deb | head -n1)
        dpkg -x "$deb" "$root"
        rm -f "$deb"
        echo "$ver" >"$stamp"
done
