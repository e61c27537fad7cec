#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# random_io: random reads and writes over a file that fits in the budget
# stay in the tier (nothing is written to the backing file while
# dirty_expire has not passed), and a long sequential stream still goes to
# the backing file as it arrives (seq_cutoff). Random requests that land
# near each other are no stream: seq_bypass() once took any access within
# 256 MiB of a file's furthest end for part of one, so after 4 MiB of
# random I/O over a file smaller than that every write went straight to the
# backing file, and reads of what it dropped came back from there; the
# kernel, writing a file's scattered dirty pages back in ascending order,
# made a stream of them; and the pieces the kernel cuts a large random read
# into, each starting where the last ended, must not add up to one.
# Last, the file read through the mount, and the backing file after the
# unmount, both match what fio wrote.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=120
zr_init
command -v fio >/dev/null || zr_skip "fio is absent (install the Debian package fio)"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
# max_read=64k: the kernel cuts a 256 KiB read into four READs (below)
zr_mount "size=256M,dirty_expire=1h,seq_cutoff=4m,block_size=64k,max_read=64k" "$B" "$M"
M=$ZR_MNT

# rio FILE SIZE RW IO_SIZE BS DIRECT: fio on $M/FILE. With DIRECT=1 each
# request reaches the daemon as it is, in the order fio makes it; with 0
# the kernel writes the dirty pages back (at the latest when fio closes the
# file), in ascending order.
rio() {
	( cd "$ZR_TMP" && fio --output-format=terse --minimal --name=r \
		--directory="$M" --filename="$1" --size="$2" --rw="$3" \
		--io_size="$4" --bs="$5" --direct="$6" --rwmixread=70 \
		--ioengine=psync --randrepeat=1 --randseed=4242 \
		--buffer_compress_percentage=50 --refill_buffers \
		>"$ZR_TMP/fio.out" 2>&1 ) ||
		{ cat "$ZR_TMP/fio.out"; fail "fio $3 on $1 failed"; }
}

# stays_in_tier LIMIT WHAT RIO_ARGS...: runs rio RIO_ARGS, and fails if it
# wrote LIMIT bytes or more to the backing file (WHAT says how it did)
stays_in_tier() {
	local limit=$1 what=$2 w0 w1
	shift 2
	w0=$(zr_stat bytes_written_backing)
	rio "$@"
	w1=$(zr_stat bytes_written_backing)
	zr_stats_on || return 0
	say "written to the backing file: $((w1 - w0)) bytes"
	[ $((w1 - w0)) -lt "$limit" ] ||
		fail "$* wrote $((w1 - w0)) bytes to the backing file ($what taken for a stream)"
}

say "a 32 MiB file written at random, then 128 MiB of random reads and writes"
rio r 32m randwrite 32m 16k 1
stays_in_tier $((64 << 10)) "random I/O over a file that fits" r 32m randrw 128m 16k 1
if zr_stats_on; then
	[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty block in the tier after the random writes"
fi

say "64 MiB of random 256 KiB reads (four READs each, one after another) and writes"
stays_in_tier $((64 << 10)) "the pieces of its reads" r 32m randrw 64m 256k 1

say "12 MiB of buffered random 4 KiB writes over a 64 MiB file, written back as fio closes it"
rio p 64m write 64m 1m 0
zr_ctl writeback all
# (the rw=write job before was a stream: until its credit of 32 requests
# that continue nothing is spent, they may still bypass; without the fix
# this wrote 71 MB)
stays_in_tier $((4 << 20)) "the kernel's writeback of scattered pages" p 64m randwrite 12m 4k 0
zr_drop_kcache
sum=$(sha256sum <"$M/r") psum=$(sha256sum <"$M/p")

say "a 64 MiB sequential stream goes to the backing file as it arrives"
head -c $((64 << 20)) /dev/urandom >"$ZR_TMP/stream"
w0=$(zr_stat bytes_written_backing)
dd if="$ZR_TMP/stream" of="$M/s" bs=1M status=none
w1=$(zr_stat bytes_written_backing)
if zr_stats_on; then
	say "written to the backing file by the stream before any fsync: $((w1 - w0)) bytes"
	# (not all of it: until 4 MiB of its WRITEs in a row continue each
	# other the stream is not found, and the kernel's flusher and the
	# close interleave theirs: 43-63 MB alone, 31 MB once beside the other
	# tests of `make -j2 check`; kept in the tier, it would be 0)
	[ $((w1 - w0)) -ge $((16 << 20)) ] ||
		fail "a 64 MiB stream wrote only $((w1 - w0)) bytes to the backing file before fsync"
fi
cmp "$ZR_TMP/stream" "$M/s" || fail "the stream reads back different"

zr_umount
[ "$(sha256sum <"$B/r")" = "$sum" ] || fail "the backing file of r differs from what was read through the mount"
[ "$(sha256sum <"$B/p")" = "$psum" ] || fail "the backing file of p differs from what was read through the mount"
cmp "$ZR_TMP/stream" "$B/s" || fail "the stream's backing file differs"
say "ok"
