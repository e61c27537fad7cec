#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stream_fill: the clean copies of a stream that goes to the backing file
# (seq_cutoff) are made while the stream goes on, by a fill thread that
# runs at the lowest priority (nice 19), not only once writes pause for
# 50 ms: a 96 MiB stream written in 1 MiB O_DIRECT writes 20 ms apart has
# most of its blocks in the tier before its last write. The copies go in as
# they are and are compressed once the stream stops. Then the file reads
# back right, through the mount and from the backing file.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=120
zr_init
zr_need_daemon "the daemon's threads and statistics"
zr_stats_on || zr_skip "needs the tier's statistics; ZR_E2E_NOSTATS=1"
zr_need_tool dd cmp awk truncate xargs

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# compressible data: text from /usr, repeated to 96 MiB
# (into files, not through `head`: with pipefail its early exit fails the
# pipe)
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort >"$ZR_TMP/list"
xargs -r cat <"$ZR_TMP/list" >"$ZR_TMP/text" 2>/dev/null || true
[ "$(stat -c %s "$ZR_TMP/text")" -gt $((1 << 20)) ] || zr_skip "too little text under /usr/include (install libc6-dev)"
for i in $(seq 96); do
	cat "$ZR_TMP/text"
	[ "$(stat -c %s "$ZR_TMP/src" 2>/dev/null || echo 0)" -lt $((96 << 20)) ] || break
done >"$ZR_TMP/src"
truncate -s 96M "$ZR_TMP/src"
[ "$(stat -c %s "$ZR_TMP/src")" = $((96 << 20)) ] || fail "could not make 96 MiB of text"

zr_mount "size=1G,seq_cutoff=1m,block_size=64k,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

say "the daemon has a fill thread at nice 19"
pid=$(zr_stat pid)
fill=
for t in /proc/"$pid"/task/*; do
	[ "$(cat "$t/comm" 2>/dev/null)" = zramfs-fill ] && fill=${t##*/}
done
[ -n "$fill" ] || fail "no thread named zramfs-fill in daemon $pid"
# field 19 of /proc/TID/stat is the nice value, counted after the command
# name, which may hold spaces; the thread sets it itself once it runs
for i in $(seq 20); do
	nice=$(sed 's/^.*) //' "/proc/$pid/task/$fill/stat" | awk '{ print $17 }')
	[ "$nice" = 19 ] && break
	sleep 0.1
done
[ "$nice" = 19 ] || fail "the fill thread's nice value is $nice, not 19"

say "a 96 MiB stream in 1 MiB writes, 20 ms apart"
c0=$(zr_stat stream_copies_idle)
pmax=0
for i in $(seq 0 94); do
	dd if="$ZR_TMP/src" of="$M/f" bs=1M count=1 skip="$i" seek="$i" \
		iflag=fullblock oflag=direct conv=notrunc status=none ||
		fail "write $i of the stream failed"
	p=$(zr_stat blocks_pending)
	[ "$p" -gt "$pmax" ] && pmax=$p && mem_at_pmax=$(zr_stat mem_used_total)
	sleep 0.02
done
c1=$(zr_stat stream_copies_idle)
dd if="$ZR_TMP/src" of="$M/f" bs=1M count=1 skip=95 seek=95 oflag=direct \
	conv=notrunc status=none || fail "the last write of the stream failed"
say "blocks the fill thread copied into the tier before the last write: $((c1 - c0)) of 1520"
# (stream_copies_idle counts the fill thread's copies only, not those the
# writeback thread makes in pauses. It needs about 0.15 s of CPU over the
# 2 s or more of the stream; an eighth of it leaves room for a machine
# whose cores other work keeps busy, where nice 19 gets 1.5% of a core.
# The first 1 MiB of the stream is no stream yet.)
[ $((c1 - c0)) -ge 190 ] ||
	fail "the fill thread copied only $((c1 - c0)) of the stream's 1520 blocks while it went on"

say "the copies went in as they were (at most $pmax blocks at once), and are compressed once the stream stops"
# (15 of each 16 are stored as they are while the stream goes on: a
# memcpy, where lz4 fell behind the stream; the fill thread compresses
# them after 50 ms without a copy queued or a read)
[ "$pmax" -ge 95 ] || fail "only $pmax of the stream's blocks were ever pending compression"
zr_wait_settled 10 ||
	fail "$(zr_stat blocks_pending) blocks still pending compression 10 s after the stream"
mem=$(zr_stat mem_used_total)
say "tier: $mem_at_pmax bytes with $pmax blocks pending, $mem after"
# text compresses 3-4x with lz4: the pending blocks took at least twice
# their compressed size
[ "$mem" -lt $((mem_at_pmax - pmax * 65536 / 2)) ] ||
	fail "the tier did not shrink when its copies were compressed ($mem_at_pmax -> $mem bytes)"
cmp "$ZR_TMP/src" "$M/f" || fail "the stream reads back different"
zr_umount
cmp "$ZR_TMP/src" "$B/f" || fail "the stream's backing file differs"
say "ok"
