#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# tight_tier: while the tier is full (just under its low watermark or
# above), a write of part of a block that the tier does not hold and the
# backing file does goes to the backing file as it is (write-around: no
# read of the block, no compression, no reclaim), and a block read from the
# backing file is kept only at its second miss (a doorkeeper); a second
# write comes in too. Data that never reached the backing file (a new
# file's growing end, a file made long by truncate) still stays in the
# tier, and what the tier holds still takes writes. The data read through
# the mount, and the backing files after the unmount, match what was
# written.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=120
zr_init
zr_need_daemon "the tier's statistics"
zr_stats_on || zr_skip "needs the tier's statistics; ZR_E2E_NOSTATS=1"
zr_need_tool dd cmp seq truncate

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# high_wm=100: no background reclaim; reclaim makes room down to low_wm=50,
# and the tier is full above 46.875% (data.c: tier_full); cold_comp=lz4:
# idle recompression does not shrink it meanwhile
zr_mount "size=4M,low_wm=50,high_wm=100,dirty_expire=1h,seq_cutoff=0,block_size=64k,cold_comp=lz4" "$B" "$M"
M=$ZR_MNT

# the data: text that compresses (a 16 MiB file fills the 4 MiB tier)
seq 1 200000 >"$ZR_TMP/b.ref"
truncate -s 1M "$ZR_TMP/b.ref"
seq 1 3000000 >"$ZR_TMP/a.ref"
truncate -s 16M "$ZR_TMP/a.ref"
[ "$(stat -c %s "$ZR_TMP/a.ref")" = $((16 << 20)) ] || fail "seq made too little data"

say "b (1 MiB) written back and dropped from the tier, then a (16 MiB) fills it"
cp "$ZR_TMP/b.ref" "$M/b"
zr_ctl writeback all
zr_ctl drop_clean
cp "$ZR_TMP/a.ref" "$M/a"
zr_ctl writeback all
used=$(zr_stat mem_used_total) budget=$(zr_stat budget)
say "tier: $used of $budget bytes"
[ "$used" -gt $((budget / 1600 * 50 * 15)) ] || fail "the tier holds only $used of $budget bytes after 16 MiB went through it"

# poke FILE BLOCK OFF LEN: writes LEN bytes of 'x' at OFF bytes into 64 KiB
# block BLOCK of $M/FILE with O_DIRECT (one WRITE as it is), and the same
# into the reference copy
poke() {
	local at=$(($2 * 65536 + $3))
	head -c "$4" /dev/zero | tr '\0' x >"$ZR_TMP/poke"
	dd if="$ZR_TMP/poke" of="$M/$1" bs="$4" count=1 seek="$at" oflag=direct,seek_bytes \
		conv=notrunc status=none || fail "O_DIRECT write into $1 failed"
	dd if="$ZR_TMP/poke" of="$ZR_TMP/$1.ref" bs="$4" count=1 seek="$at" oflag=seek_bytes \
		conv=notrunc status=none
}

say "4 KiB writes into blocks of b the tier does not hold go around it"
wa0=$(zr_stat written_around) w0=$(zr_stat bytes_written_backing) d0=$(zr_stat blocks_dirty)
poke b 1 4096 4096
poke b 5 0 4096
poke b 9 61440 4096
wa1=$(zr_stat written_around) w1=$(zr_stat bytes_written_backing) d1=$(zr_stat blocks_dirty)
say "written_around $wa0 -> $wa1, bytes_written_backing $w0 -> $w1, blocks_dirty $d0 -> $d1"
[ $((wa1 - wa0)) = $((3 * 4096)) ] ||
	fail "written_around grew by $((wa1 - wa0)), not the 12288 bytes written into blocks the tier does not hold"
[ $((w1 - w0)) = $((3 * 4096)) ] ||
	fail "bytes_written_backing grew by $((w1 - w0)), not by the 12288 bytes written around"
[ "$d1" = "$d0" ] || fail "the writes around the tier left dirty blocks ($d0 -> $d1)"

# comes_in WHAT FILE BLOCK OFF: a 4 KiB poke that must go into the tier as
# a dirty block, not around it (WHAT says which write it is)
comes_in() {
	local what=$1 wa0 d0 wa1 d1
	shift
	wa0=$(zr_stat written_around) d0=$(zr_stat blocks_dirty)
	poke "$@" 4096
	wa1=$(zr_stat written_around) d1=$(zr_stat blocks_dirty)
	[ "$wa1" = "$wa0" ] || fail "$what went around the tier ($wa0 -> $wa1)"
	[ "$d1" -gt "$d0" ] || fail "$what left no dirty block in the tier ($d0 -> $d1)"
}

say "a second write into one of them comes into the tier"
# (into the one poked last: the doorkeeper's tag of a block is a hint that
# a miss hashed to the same slot overwrites, and the poke of block 9 after
# block 5's could have, about 1 run in 4096)
comes_in "a second write into a block" b 9 32768

# (before anything reads b through the mount: a read that misses the
# kernel's cache would leave the doorkeeper a tag of block 3)
say "a block read once is not kept; read again, it is"
m0=$(zr_stat misses_not_kept)
dd if="$M/b" of=/dev/null bs=4096 count=1 skip=48 iflag=direct status=none
m1=$(zr_stat misses_not_kept) h1=$(zr_stat hits)
[ $((m1 - m0)) = 1 ] || fail "misses_not_kept grew by $((m1 - m0)) at the first read of a block, not 1"
dd if="$M/b" of=/dev/null bs=4096 count=1 skip=49 iflag=direct status=none
m2=$(zr_stat misses_not_kept)
[ "$m2" = "$m1" ] || fail "the second miss of a block was not kept (misses_not_kept $m1 -> $m2)"
dd if="$M/b" of=/dev/null bs=4096 count=1 skip=50 iflag=direct status=none
h3=$(zr_stat hits)
[ "$h3" -gt "$h1" ] || fail "the third read of the block was no hit (hits $h1 -> $h3): the second miss did not keep it"

say "a write into a block the tier holds stays in the tier"
comes_in "a write into a block the tier holds" b 3 8192

say "a new file written in 16 KiB pieces stays in the tier"
wa0=$(zr_stat written_around)
head -c $((256 << 10)) "$ZR_TMP/a.ref" >"$ZR_TMP/c.ref"
dd if="$ZR_TMP/c.ref" of="$M/c" bs=16k oflag=direct status=none || fail "O_DIRECT writes of c failed"
wa1=$(zr_stat written_around)
[ "$wa1" = "$wa0" ] || fail "the growing end of a new file went around the tier ($((wa1 - wa0)) bytes)"

say "a file made long by truncate, then written in 4 KiB pieces, stays in the tier"
truncate -s 1M "$M/d" "$ZR_TMP/d.ref"
poke d 2 4096 4096
poke d 6 0 4096
wa2=$(zr_stat written_around)
[ "$wa2" = "$wa1" ] || fail "writes into a file's blocks that never reached the backing file went around the tier ($((wa2 - wa1)) bytes)"

cmp "$ZR_TMP/a.ref" "$M/a" || fail "a reads back different"
cmp "$ZR_TMP/b.ref" "$M/b" || fail "b reads back different"
cmp "$ZR_TMP/c.ref" "$M/c" || fail "c reads back different"
cmp "$ZR_TMP/d.ref" "$M/d" || fail "d reads back different"
zr_umount
for f in a b c d; do
	cmp "$ZR_TMP/$f.ref" "$B/$f" || fail "the backing file of $f differs from what was written"
done
say "ok"
