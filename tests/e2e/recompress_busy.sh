#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# recompress_busy: idle recompression (data at rest goes from lz4 to zstd)
# waits while the CPUs are busy with other work, and catches up once they
# have time to spare.  64 MiB of text is written and settled, then a CPU
# hog per CPU runs while the 5 s passes come by: the pass that could take
# the data (the second after the write) is cut short (recompress_busy
# counts it) and the slices between passes do not run, so most blocks stay
# lz4.  Once the hogs are gone, the rest is recompressed within seconds.
# (The hogs run for about 13 s, which may slow tests run beside this one.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "recompression is the daemon's"
zr_stats_on || zr_skip "needs the .zramfs control directory"
zr_need_tool nproc
[ -r /proc/stat ] || zr_skip "no /proc/stat to look at the CPUs with"

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
[ "$(zr_stat recompressions)" = 0 ] || fail "recompressions before any pass could take the data: $(zr_stat recompressions)"

say "a CPU hog on every CPU: the pass that could take the data is cut short"
ncpu=$(nproc)
hogs=()
# (the hogs end with the test whatever happens; not once they are reaped)
ZR_ATEXIT+=('[ ${#hogs[@]} = 0 ] || kill "${hogs[@]}" 2>/dev/null')
for i in $(seq "$ncpu"); do
	sh -c 'while :; do :; done' &
	hogs+=($!)
done
# passes come every 5 s from the mount: the first marks what is idle, the
# second (at about 10 s) takes it; wait past it, reading the stats seldom
# (a read is a request: the slices wait for 250 ms without one)
while [ $((SECONDS - t0)) -lt 13 ]; do
	sleep 1
done
busy=$(zr_stat recompress_busy) done_busy=$(zr_stat recompressions)
say "  recompress_busy $busy, $done_busy of $blocks blocks recompressed at $((SECONDS - t0)) s"
kill "${hogs[@]}" 2>/dev/null || true
for h in "${hogs[@]}"; do
	wait "$h" 2>/dev/null || true
done
hogs=()
[ "$busy" -ge 1 ] || fail "no pass was cut short with $ncpu CPU hogs running"
[ $((done_busy * 2)) -le "$blocks" ] ||
	fail "with $ncpu CPU hogs, $done_busy of $blocks blocks were recompressed, want at most half"

say "the hogs gone: the rest is recompressed"
for i in $(seq 40); do
	n=$(zr_stat recompressions)
	[ $((n * 10)) -ge $((blocks * 9)) ] && break
	sleep 0.5
done
say "  $n of $blocks blocks recompressed $((SECONDS - t0)) s after the mount"
[ $((n * 10)) -ge $((blocks * 9)) ] ||
	fail "20 s after the hogs, $n of $blocks blocks were recompressed, want >= 90%"
for i in 1 2 3 4 5 6 7 8; do
	cmp "$ZR_TMP/text" "$ZR_MNT/t$i" || fail "t$i differs from what was written"
done
zr_umount
say "ok"
