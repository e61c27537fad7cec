#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# lowmem: without swap, memory pressure (PSI) stays low until the OOM killer
# is close, because anonymous memory -- the tier is some -- cannot be
# reclaimed. The daemon also watches headroom (MemAvailable, or the cgroup
# limit less what it cannot reclaim) and gives memory back when it runs out.
# Here a daemon in a 512 MiB memory cgroup holds 280 MiB of dirty data when
# a second process in the cgroup grows to 300 MiB: the tier must shrink
# (write back and drop) so that both live and no byte is lost. Without the
# headroom trigger the cgroup's OOM killer ends the daemon, the largest
# process, and the dirty data with it. The other process grows by about
# 130 MB/s: a daemon that looked at its headroom once a second and gave back
# only what brought it to three marks lost the race (the OOM killer ended
# the other process) in 5 runs of 8 on 2026-12-01, and 2 of 3 at half that
# rate while the disk was busy.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the daemon watches memory"
zr_need_tool python3

# An ASan daemon holds shadow memory and a quarantine of freed memory on
# top of the tier, and gives little back when the tier shrinks.
ldd "$ZRAMFS" 2>/dev/null | grep -q libasan &&
	zr_skip "the daemon is built with AddressSanitizer, whose own memory does not shrink with the tier"
# A backing directory in RAM takes what the tier writes back as memory of
# its own: there the daemon only drops clean blocks (nothing to see here).
[ "$(stat -f -c %T "$ZR_TMP")" = tmpfs ] &&
	zr_skip "$ZR_TMP is on tmpfs; set TMPDIR to a directory on a disk"

zr_memcg zr_e2e_lowmem $((512 << 20))
# no swap use, so that the test means the same on a machine that has swap
echo 0 >"$CG/memory.swappiness" 2>/dev/null || true
REAL=$ZRAMFS ZRAMFS=$ZR_IN_CG

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((280 << 20)) /dev/urandom >"$ZR_TMP/data" || fail "cannot make the test data"

# nothing leaves the tier by age, by the watermarks or as a stream
zr_mount "size=320M,dirty_expire=1h,high_wm=100,seq_cutoff=0" "$B" "$M"
ZRAMFS=$REAL
adj=$(cat "/proc/$ZR_PID/oom_score_adj")
if (echo -500 >/proc/self/oom_score_adj) 2>/dev/null; then
	[ "$adj" = -500 ] || fail "the daemon's oom_score_adj is $adj, expected -500"
else
	# root without CAP_SYS_RESOURCE (as in some containers) cannot lower it
	say "not checked: oom_score_adj cannot be lowered here (daemon's: $adj)"
fi
cp "$ZR_TMP/data" "$M/big" || fail "cp into the tier failed"
sync -f "$M" 2>/dev/null	# the kernel's cache into the daemon (no fsync)
dirty=$(zr_stat blocks_dirty)
say "tier: $(zr_stat mem_used_total) bytes, $dirty dirty blocks; backing file $(stat -c %s "$B/big") bytes"
[ "$(zr_stat mem_used_total)" -gt $((250 << 20)) ] ||
	fail "the tier holds only $(zr_stat mem_used_total) bytes after writing 280 MiB"
[ "$dirty" -gt 0 ] || fail "no dirty blocks in the tier: the test means nothing"

say "a second process in the cgroup grows to 300 MiB, 4 MiB every 30 ms"
python3 - "$CG" >"$ZR_TMP/hog.out" 2>&1 <<'PY' &
import os, sys, time
with open(sys.argv[1] + "/cgroup.procs", "w") as f:
    f.write(str(os.getpid()))
chunks = []
for i in range(75):
    chunks.append(b"\x5a" * (4 << 20))	# written, so charged
    time.sleep(0.03)
time.sleep(2)
print("hog done", sum(len(c) for c in chunks) >> 20, "MiB")
PY
HOG=$!
hog_rc=0
wait $HOG || hog_rc=$?
say "hog: status $hog_rc, $(cat "$ZR_TMP/hog.out")"
kill -0 "$ZR_PID" 2>/dev/null || {
	cat "$ZR_LOG" >&2
	grep -i "killed\|oom" <(dmesg 2>/dev/null | tail -5) >&2
	fail "the daemon died (OOM?) while another process in its cgroup grew"
}
[ "$hog_rc" = 0 ] || fail "the other process died (status $hog_rc): $(cat "$ZR_TMP/hog.out")"
shrinks=$(zr_stat lowmem_shrinks)
say "lowmem_shrinks $shrinks, tier now $(zr_stat mem_used_total) bytes, OOM events $(awk '$1 == "oom_kill" { print $2 }' "$CG/memory.oom_control")"
[ "$shrinks" -gt 0 ] || fail "the tier was never shrunk for low memory"
[ "$(zr_stat mem_used_total)" -lt $((250 << 20)) ] ||
	fail "the tier still holds $(zr_stat mem_used_total) bytes"
cmp "$ZR_TMP/data" "$M/big" || fail "the file differs after the shrink"
zr_umount
cmp "$ZR_TMP/data" "$B/big" || fail "the backing file differs after unmount"
rm -f "$ZR_TMP/data"
say "ok"
