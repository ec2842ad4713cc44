#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/kernel/kernel-abi.sh - print the ABI of the kernel the guest-kernel
# test boots ("6.1.0-57-amd64"): the one Debian's linux-image-amd64 points at
# now.  dev.sh installs linux-headers-ABI for it; kernel.sh downloads
# linux-image-ABI.  Prints nothing (exit 1) when apt does not know the
# package (no package lists yet: apt-get update).
abi=$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n 1)
[ -n "$abi" ] || exit 1
echo "$abi"
