#!/bin/sh
# profd in a Debian arm64 guest under qemu-system-aarch64 (TCG, -cpu max: pointer authentication
# on), sampling the whole guest while aarch64 programs run:
#
#   tests/arm64-guest.sh --kernel 5.10|6.1|6.12 --out PROFILE.pb.gz [--seconds N] [--frequency HZ]
#                        [--console FILE] [--extra DIR] [--ready FILE] [--run 'PROGRAM ARGS'...] [PROGRAM [ARGS...]]
#
# Every --run program (and PROGRAM) starts at once in one boot; one profile window covers them all
# (tell them apart by their comm label).
#
# Needs tests/arm64-cross-build.sh to have built build-aarch64/ (and its arm64 root) first, and the
# packages qemu-system-arm, cpio. PROGRAM is best static (its libraries are otherwise taken from
# the cross-build's arm64 root). Details: tests/arm64/guest.py.
exec python3 "$(dirname "$0")/arm64/guest.py" "$@"
