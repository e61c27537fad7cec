#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# recompress_busy: idle recompression (data at rest goes from lz4 to zstd)
# waits while the CPUs are busy with other work, and catches up once they
# have time to spare.  64 MiB of text is written and settled, then a CPU
# hog per CPU runs through two 5 s passes counted in recompress_busy (the
# first marks what is idle, the second may take it): cut short, they take
# at most half of the blocks, and the slices between passes do not run.
# Once the hogs are gone, the rest is recompressed within seconds.  (The
# hogs run for 10-15 s, which may slow tests run beside this one.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "recompression is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool nproc
[ -r /proc/stat ] || zr_skip "no /proc/stat to look at the CPUs with"
# (a CPU quota is not seen by the look: hogs under one leave the CPUs idle)
cg2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup 2>/dev/null)
for q in /sys/fs/cgroup$cg2/cpu.max /sys/fs/cgroup/unified$cg2/cpu.max; do
	[ -r "$q" ] && [ "$(cut -d' ' -f1 "$q")" != max ] &&
		zr_skip "a CPU quota ($q): /proc/stat shows the CPUs idle under it"
done
cg1=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' /proc/self/cgroup 2>/dev/null)
q=/sys/fs/cgroup/cpu$cg1/cpu.cfs_quota_us
[ -r "$q" ] && [ "$(cat "$q")" != -1 ] && zr_skip "a CPU quota ($q): /proc/stat shows the CPUs idle under it"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
find /usr/include -type f -name '*.h' 2>/dev/null | LC_ALL=C sort | xargs -r cat 2>/dev/null |
	head -c $((8 << 20)) >"$ZR_TMP/text" || true
[ "$(stat -c %s "$ZR_TMP/text")" -ge $((8 << 20)) ] || zr_skip "too few C headers for 8 MiB of text"
zr_mount "size=256M,block_size=64k,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
t0=$SECONDS
[ "$(zr_config cold_comp)" = zstd ] || fail "config shows cold_comp '$(zr_config cold_comp)', want zstd"

# 64 MiB: eight files of the text, 1024 blocks; settled (compressed with
# lz4) before the hogs start (a cut pass takes 64 blocks at a time: 128 of
# them here)
for i in 1 2 3 4 5 6 7 8; do
	cp "$ZR_TMP/text" "$ZR_MNT/t$i"
done
sync -f "$ZR_MNT/t1"
zr_wait_settled 20 || fail "blocks still pending compression 20 s after the write"
blocks=$(zr_stat blocks_hot)
[ "$blocks" -ge 1000 ] || fail "blocks_hot is $blocks after writing 64 MiB, want >= 1000"
rc0=$(zr_stat recompressions) rb0=$(zr_stat recompress_busy)
# (passes come every 5 s from the mount: the second one after the write
# takes what it finds idle; a machine that took 8 s or more to write and
# settle the data lets it run before the hogs start)
[ "$rc0" = 0 ] ||
	zr_skip "$rc0 blocks were recompressed before the hogs started ($((SECONDS - t0)) s after the mount): too slow to test the busy case"

say "a CPU hog on every CPU: two passes are cut short"
ncpu=$(nproc)
zr_hogs_start "$ncpu"
# two passes made while busy: the first after the write marks the data
# idle, the second could take it all; wait for them, reading the stats
# seldom (a read is a request: the slices wait for 250 ms without one)
for i in $(seq 25); do
	sleep 1
	busy=$(($(zr_stat recompress_busy) - rb0))
	[ "$busy" -ge 2 ] && break
done
done_busy=$(($(zr_stat recompressions) - rc0))
say "  $busy passes made busy, $done_busy of $blocks blocks recompressed, $((SECONDS - t0)) s after the mount"
zr_hogs_stop
[ "$busy" -ge 2 ] || fail "$busy passes made busy in 25 s with $ncpu CPU hogs running, want 2"
[ $((done_busy * 2)) -le "$blocks" ] ||
	fail "with $ncpu CPU hogs, $done_busy of $blocks blocks were recompressed, want at most half"

say "the hogs gone: the rest is recompressed"
# (40 s: other work on the machine, a parallel `make check`, may keep the
# CPUs busy for a while)
for i in $(seq 40); do
	n=$(zr_stat recompressions)
	[ $((n * 10)) -ge $((blocks * 9)) ] && break
	sleep 1
done
say "  $n of $blocks blocks recompressed $((SECONDS - t0)) s after the mount"
[ $((n * 10)) -ge $((blocks * 9)) ] ||
	fail "40 s after the hogs, $n of $blocks blocks were recompressed, want >= 90%"
for i in 1 2 3 4 5 6 7 8; do
	cmp "$ZR_TMP/text" "$ZR_MNT/t$i" || fail "t$i differs from what was written"
done
zr_umount
say "ok"
