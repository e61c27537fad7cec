#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cgroup_limit: a daemon started in a memory cgroup (v1, limit 400 MiB)
# takes size= in percent as a share of that limit, not of the machine's RAM
# (the default 25% would otherwise be a quarter of 24 GiB: the OOM killer
# would end the daemon, and the dirty data it holds, long before the budget
# is full), and warns when an absolute size= is more than half the limit.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the limit is read by the daemon"
# the daemon enters the cgroup before it starts
zr_memcg zr_e2e_cgroup_limit $((400 << 20))
REAL=$ZRAMFS ZRAMFS=$ZR_IN_CG

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"

say "size=25% in a cgroup limited to 400 MiB"
zr_mount "size=25%" "$B" "$M"
grep -qx "$ZR_PID" "$CG/cgroup.procs" || fail "the daemon is not in the cgroup"
size=$(awk '$1 == "size" { print $2 }' "$ZR_MNT/.zramfs/config")
[ "$size" = $((100 << 20)) ] || fail "size=25% gave a budget of $size bytes, expected $((100 << 20)) (25% of the cgroup's 400 MiB)"
grep -q "warning" "$ZR_LOG" && fail "a warning for a budget within the limit: $(cat "$ZR_LOG")"
zr_umount

say "size=300M in the same cgroup: a warning"
zr_mount "size=300M" "$B" "$M"
grep -q "more than half the memory limit of this cgroup" "$ZR_LOG" ||
	fail "no warning for a budget of 300 MiB under a 400 MiB limit: $(cat "$ZR_LOG")"
zr_umount
ZRAMFS=$REAL

say "outside the cgroup, 25% is a quarter of the machine's RAM"
zr_mount "size=25%" "$B" "$M"
size=$(awk '$1 == "size" { print $2 }' "$ZR_MNT/.zramfs/config")
[ "$size" -gt $((100 << 20)) ] || fail "size=25% outside the cgroup gave only $size bytes"
zr_umount
