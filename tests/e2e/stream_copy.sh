#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stream_copy: a sequential write longer than seq_cutoff goes to the backing
# file at once, and the writeback thread copies its blocks into the tier
# once the stream pauses (stream_copies grows, and a cold read is served
# without reading the backing file again).  Writes that land on the same
# blocks while copies are queued, and a file deleted with copies queued,
# must not bring old data back: the file is compared with the same
# operations done on a plain file, while mounted, after the clean blocks are
# dropped, and after a remount.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
# compressible data: text from /usr, repeated to 48 MiB
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort |
	xargs -r cat 2>/dev/null | head -c $((8 << 20)) >"$ZR_TMP/text" || true
[ "$(stat -c %s "$ZR_TMP/text")" -gt $((1 << 20)) ] || fail "too little text under /usr/include"
for i in 1 2 3 4 5 6; do cat "$ZR_TMP/text"; done | head -c $((48 << 20)) >"$ZR_TMP/src"

zr_mount "size=512M,seq_cutoff=1m" "$B" "$M"
M=$ZR_MNT

say "a 48 MiB stream, then overwrites of some of its blocks right away"
c0=$(zr_stat stream_copies)
cp "$ZR_TMP/src" "$R/f"
dd if="$ZR_TMP/src" of="$M/f" bs=1M conv=fdatasync status=none
# while copies are queued (they wait for a 50 ms pause): small writes into
# blocks of the stream, which must win over the backing file's old data
for off in 1 100 4097 20000 40000 49000; do
	printf 'OVERWRITE-%06d' "$off" | dd of="$M/f" bs=1k seek="$off" conv=notrunc status=none
	printf 'OVERWRITE-%06d' "$off" | dd of="$R/f" bs=1k seek="$off" conv=notrunc status=none
done
# a second stream deleted at once: its queued copies must go quietly
dd if="$ZR_TMP/src" of="$M/gone" bs=1M count=16 status=none
rm "$M/gone"
sleep 2
cmp "$M/f" "$R/f" || fail "the file differs from the reference after the copies"
[ ! -e "$M/gone" ] || fail "the deleted file is back"

if zr_stats_on; then
	# 48 MiB = 768 blocks of 64 KiB; the overwritten ones are in the
	# tier already and are not copied. (Waited for up to 20 s more: on a
	# loaded machine, load average 10 in a make check beside a fuzzer,
	# 688 had been copied after the 2 s above.)
	for i in $(seq 100); do
		c1=$(zr_stat stream_copies)
		[ "$c1" -ge $((c0 + 700)) ] && break
		sleep 0.2
	done
	say "stream_copies: $c0 -> $c1"
	[ "$c1" -ge $((c0 + 700)) ] || fail "only $((c1 - c0)) blocks of the stream were copied into the tier"
	say "a cold read is served from the tier"
	echo 3 >/proc/sys/vm/drop_caches
	r0=$(zr_stat bytes_read_backing)
	cmp "$M/f" "$R/f" || fail "cold read differs from the reference"
	r1=$(zr_stat bytes_read_backing)
	[ $((r1 - r0)) -lt $((4 << 20)) ] || fail "cold read read $((r1 - r0)) bytes from the backing file"
	say "after the clean blocks are dropped"
	zr_ctl drop_clean
	echo 3 >/proc/sys/vm/drop_caches
	cmp "$M/f" "$R/f" || fail "the file differs after drop_clean"

	say "a stream read over tier blocks, backing data, a hole and dirty blocks past the backing file's end"
	# h: small writes at 3000k, 12000k and 20000k (not a stream: they stay
	# dirty in the tier, dirty_expire 30 s), then an 8 MiB stream over
	# the start (to the backing file, over the dirty block at 3000k): the
	# backing file is 8 MiB long, the file 20 MiB with holes
	for off in 3000 12000 20000; do
		printf 'DIRTY-%06d' "$off" | dd of="$M/h" bs=1k seek="$off" conv=notrunc status=none
		printf 'DIRTY-%06d' "$off" | dd of="$R/h" bs=1k seek="$off" conv=notrunc status=none
	done
	dd if="$ZR_TMP/src" of="$M/h" bs=1M count=8 conv=notrunc status=none
	dd if="$ZR_TMP/src" of="$R/h" bs=1M count=8 conv=notrunc status=none
	zr_ctl drop_clean
	echo 3 >/proc/sys/vm/drop_caches
	[ "$(stat -c %s "$B/h")" -lt $((20000 << 10)) ] ||
		fail "the backing file of h already has its full size: the case is not tested"
	cmp "$M/h" "$R/h" || fail "a stream read of h differs from the reference"

	say "streams of WRITEs that start and end mid-block (96 KiB O_DIRECT writes)"
	# each O_DIRECT write is a WRITE of its own: every other one starts
	# in the middle of a 64 KiB block, as the kernel's writeback often
	# cuts a buffered stream. i: a new file; j: over dirty blocks of the
	# tier and on past the file's end; k: a stream, then another that
	# starts past the end (a gap that must read as zeros)
	dd if="$ZR_TMP/src" of="$M/i" bs=96k count=256 oflag=direct status=none
	dd if="$ZR_TMP/src" of="$R/i" bs=96k count=256 status=none
	for off in 500 5000 9000; do
		printf 'DIRTY-%06d' "$off" | dd of="$M/j" bs=1k seek="$off" conv=notrunc status=none
		printf 'DIRTY-%06d' "$off" | dd of="$R/j" bs=1k seek="$off" conv=notrunc status=none
	done
	dd if="$ZR_TMP/src" of="$M/j" bs=96k count=160 seek=3 oflag=direct conv=notrunc status=none
	dd if="$ZR_TMP/src" of="$R/j" bs=96k count=160 seek=3 conv=notrunc status=none
	for d in "$M" "$R"; do
		fl=; [ "$d" = "$M" ] && fl=oflag=direct
		dd if="$ZR_TMP/src" of="$d/k" bs=96k count=40 $fl status=none
		dd if="$ZR_TMP/src" of="$d/k" bs=96k count=40 skip=7 seek=51 $fl conv=notrunc status=none
	done
	for f in i j k; do cmp "$M/$f" "$R/$f" || fail "$f differs from the reference"; done
	zr_ctl drop_clean
	echo 3 >/proc/sys/vm/drop_caches
	for f in i j k; do cmp "$M/$f" "$R/$f" || fail "$f differs from the reference after drop_clean"; done
fi

zr_umount
cmp "$B/f" "$R/f" || fail "the backing file differs after unmount"
if zr_stats_on; then
	for f in h i j k; do cmp "$B/$f" "$R/$f" || fail "the backing file of $f differs after unmount"; done
fi
[ ! -e "$B/gone" ] || fail "the deleted file is in the backing directory"
zr_mount "" "$B" "$M"
cmp "$ZR_MNT/f" "$R/f" || fail "the file differs after a remount"
zr_umount
say "ok"
