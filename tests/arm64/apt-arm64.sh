#!/bin/sh
# apt-get/apt-cache for Debian's arm64 packages of one suite, with a sources list and state of
# their own under CACHE/apt-SUITE: this machine's apt configuration (and dpkg's architectures) are
# never touched. Usage: apt-arm64.sh CACHE SUITE apt-get|apt-cache ARGS...
set -eu
cache=$1 suite=$2
shift 2
base=$cache/apt-$suite
mkdir -p "$base/lists/partial" "$base/cache/archives/partial"
mirror=${PROFD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
{
        echo "deb [signed-by=$keyring] $mirror $suite main"
        echo "deb [signed-by=$keyring] $mirror-security $suite-security main"
} >"$base/sources.list"
tool=$1
shift
exec "$tool" -o Dir::Etc::SourceList="$base/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o Dir::State::Lists="$base/lists" -o Dir::Cache="$base/cache" -o Dir::State::Status=/dev/null \
        -o APT::Architecture=arm64 -o APT::Architectures=arm64 \
        -o APT::Sandbox::User=root -o Debug::NoLocking=1 "$@"
