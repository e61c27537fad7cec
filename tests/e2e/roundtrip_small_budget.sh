#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# roundtrip_small_budget: ~100 MB of mixed data (text, binaries, zeros,
# random, a tree of small files) through a mount whose RAM budget is 8 MiB,
# so blocks must cycle to the backing directory and back.  Checks the bytes
# while mounted, after drop_clean, in the backing directory after unmount,
# and after a remount; and that the tier stayed within its budget, also
# with cache=writethrough (whose clean copies once took no room: 16 times
# the budget).
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=150
zr_init

S=$ZR_TMP/src B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$S/tree" "$B" "$M"

say "making ~100 MB of mixed test data in $S"
# Text: C headers and documentation, 24 MiB at most (head closes the pipe
# early, hence the "|| true").
find /usr/include /usr/share/doc -type f \( -name '*.h' -o -name '*.txt' \
	-o -name 'copyright' \) -readable 2>/dev/null | LC_ALL=C sort |
	xargs -r cat 2>/dev/null | head -c $((24 << 20)) >"$S/text.dat" || true
# Binaries: programs and libraries, 24 MiB at most.
find /usr/lib /usr/bin -type f -size +64k -readable 2>/dev/null |
	LC_ALL=C sort | xargs -r cat 2>/dev/null |
	head -c $((24 << 20)) >"$S/bin.dat" || true
[ "$(stat -c %s "$S/text.dat")" -gt $((4 << 20)) ] || fail "too little text under /usr"
dd if=/dev/zero of="$S/zero.dat" bs=1M count=16 status=none
dd if=/dev/urandom of="$S/rand.dat" bs=1M count=24 status=none
# Mixed: 128 KiB pieces of text, zeros, random and binary in turn.
for i in $(seq 0 31); do
	case $((i % 4)) in
	0) f=text.dat ;; 1) f=zero.dat ;; 2) f=rand.dat ;; 3) f=bin.dat ;;
	esac
	dd if="$S/$f" bs=128k skip="$i" count=1 status=none
done >"$S/mixed.dat"
# Unaligned sizes and small files.
head -c 1234567 "$S/rand.dat" >"$S/odd.dat"
: >"$S/empty.dat"
# A tree of small files: kernel headers (or the start of the text file).
if [ -d /usr/include/linux ]; then
	cp -rL /usr/include/linux "$S/tree/" 2>/dev/null || true
fi
for i in $(seq 0 199); do
	dd if="$S/text.dat" bs=1k skip="$((i * 7))" count="$((i % 13 + 1))" \
		of="$S/tree/small$i" status=none
done
total=$(du -sb "$S" | cut -f1)
say "test data: $((total >> 20)) MiB in $(find "$S" -type f | wc -l) files"
[ "$total" -gt $((80 << 20)) ] || fail "could not make enough test data ($total bytes)"
zr_sums "$S" >"$ZR_TMP/sums.ref"

zr_mount "size=8M,dirty_expire=2s" "$B" "$M"
say "copying the data in"
cp -a "$S/." "$ZR_MNT/" || fail "cp into the mount failed"
zr_drop_kcache
zr_same_sums "$ZR_TMP/sums.ref" "$ZR_MNT" "read back while mounted"

if zr_stats_on; then
	budget=$(zr_stat budget)
	[ "$budget" = $((8 << 20)) ] || fail "budget is $budget, expected $((8 << 20)) for size=8M"
	bs=$(zr_config block_size)
	max=$(zr_stat mem_used_max)
	say "mem_used_max $max, budget $budget, block_size $bs"
	[ "$max" -le $((budget + 32 * bs)) ] ||
		fail "mem_used_max $max exceeds the budget $budget by more than 32 blocks"
	wb=$(zr_stat bytes_written_backing)
	[ "$wb" -gt $((total / 2)) ] ||
		fail "bytes_written_backing $wb: the data ($total) cannot fit 8 MiB without writeback"
fi

zr_ctl drop_clean
zr_drop_kcache
zr_same_sums "$ZR_TMP/sums.ref" "$ZR_MNT" "read back after drop_clean"
zr_umount
zr_same_sums "$ZR_TMP/sums.ref" "$B" "backing directory after unmount"

zr_mount "size=8M" "$B" "$M"
zr_same_sums "$ZR_TMP/sums.ref" "$ZR_MNT" "read back after remount"
if zr_stats_on; then
	misses=$(zr_stat misses)
	[ "$misses" -gt 0 ] || fail "reads after a remount must miss (misses=$misses)"
fi
zr_umount
zr_same_sums "$ZR_TMP/sums.ref" "$B" "backing directory after the second unmount"

if zr_stats_on; then
	say "cache=writethrough: the clean copies stay within the budget"
	B2=$ZR_TMP/backing-wt M2=$ZR_TMP/mnt-wt
	mkdir -p "$B2" "$M2"
	zr_mount "cache=writethrough,size=8M,seq_cutoff=0" "$B2" "$M2"
	cat "$S/text.dat" "$S/bin.dat" >"$ZR_MNT/all" || fail "writing through the writethrough mount failed"
	sync "$ZR_MNT/all"
	budget=$(zr_stat budget) bs=$(zr_config block_size) max=$(zr_stat mem_used_max)
	say "writethrough: mem_used_max $max, budget $budget"
	[ "$max" -le $((budget + 32 * bs)) ] ||
		fail "writethrough: mem_used_max $max exceeds the budget $budget by more than 32 blocks"
	[ "$(zr_stat bytes_written_backing)" -ge $((24 << 20)) ] ||
		fail "writethrough: only $(zr_stat bytes_written_backing) bytes reached the backing file"
	zr_ctl drop_clean
	zr_drop_kcache
	cat "$S/text.dat" "$S/bin.dat" | cmp - "$ZR_MNT/all" ||
		fail "writethrough: the file does not read back"
	zr_umount
fi
