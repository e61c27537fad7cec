#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fio_verify: fio writes 64 MiB at random offsets with crc32c verification
# headers in every block through a mount whose budget is 16 MiB, then reads
# and verifies all of it; a second job writes with mmap; after a remount the
# same jobs verify only (verify_only), so the data must have persisted.
# Last, eight writers on a 16 MiB budget while two CPU hogs load the
# machine: with the backing disk nearly empty, the daemon must never answer
# ENOSPC (its enospc count stays 0; with the kernel's writeback cache such
# an error drops the data and only fsync/close hear of it), and every block
# verifies.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=150
zr_init
command -v fio >/dev/null || zr_skip "fio is absent (install the Debian package fio)"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "size=16M,block_size=32k" "$B" "$M"

# job MNT EXTRA...: the two jobs; EXTRA adds --verify_only on the remount.
job() {
	local d=$1
	shift
	# fio saves verify state files in its working directory: use ours
	( cd "$ZR_TMP" && fio --output-format=terse --terse-version=3 --minimal \
		--name=randw --directory="$d" --filename=rand.dat --size=64m \
		--rw=randwrite --bs=4k --ioengine=psync --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --randrepeat=1 --randseed=1234 "$@" \
		--name=mmapw --directory="$d" --filename=mmap.dat --size=16m \
		--rw=randwrite --bs=16k --ioengine=mmap --verify=crc32c \
		--verify_fatal=1 --do_verify=1 --randrepeat=1 --randseed=99 "$@" \
		>"$ZR_TMP/fio.out" 2>&1 )
}
say "fio randwrite 64 MiB + mmap 16 MiB, then verify"
job "$ZR_MNT" || { cat "$ZR_TMP/fio.out"; fail "fio write+verify failed"; }
zr_umount
zr_mount "size=16M,block_size=32k" "$B" "$M"
say "fio verify_only after remount"
zr_drop_kcache
job "$ZR_MNT" --verify_only || { cat "$ZR_TMP/fio.out"; fail "fio verify after remount failed"; }
zr_umount
[ "$(stat -c %s "$B/rand.dat")" = $((64 << 20)) ] || fail "backing rand.dat has the wrong size"

say "eight writers on a 16 MiB budget, two CPU hogs: no ENOSPC with room on disk"
rm -f "$B/rand.dat" "$B/mmap.dat"
zr_mount "size=16M,seq_cutoff=0" "$B" "$M"
zr_hogs_start 2
( cd "$ZR_TMP" && fio --output-format=terse --terse-version=3 --minimal \
	--name=w --directory="$ZR_MNT" --ioengine=psync --rw=randwrite --bs=16k \
	--size=24m --numjobs=8 --buffer_compress_percentage=70 --refill_buffers \
	--verify=crc32c --verify_fatal=1 --do_verify=1 >"$ZR_TMP/fio.out" 2>&1 ) && rc=0 || rc=$?
zr_hogs_stop
[ "$rc" = 0 ] || { cat "$ZR_TMP/fio.out"; fail "fio with eight writers failed"; }
n=$(zr_stat enospc)
[ "${n:-0}" = 0 ] || fail "the daemon answered ENOSPC $n times with the backing disk nearly empty"
zr_umount
