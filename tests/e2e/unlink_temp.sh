#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# unlink_temp: a temporary file written and deleted before writeback never
# reaches the backing directory (bytes_written_backing does not grow by its
# size) -- most of the I/O a build saves.  A control file kept alongside
# must be written back, so the counter is shown to work.  An open file that
# is unlinked stays readable through its descriptor, also after its cached
# blocks are dropped (dirty, and clean ones that must be re-read from the
# unlinked backing file), until it is closed.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
head -c $((32 << 20)) /dev/urandom >"$ZR_TMP/big"
head -c $((4 << 20)) /dev/urandom >"$ZR_TMP/keep"
head -c $((8 << 20)) /dev/urandom >"$ZR_TMP/open"
zr_mount "size=256M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT

say "a 32 MiB temporary file, deleted before writeback"
mkdir "$M/obj"
bw0=$(zr_stat bytes_written_backing)
cp "$ZR_TMP/big" "$M/obj/tmp.o"
cp "$ZR_TMP/keep" "$M/obj/keep.o"
rm "$M/obj/tmp.o"
zr_ctl writeback all
if zr_stats_on; then
	bw1=$(zr_stat bytes_written_backing)
	say "bytes_written_backing grew by $((bw1 - bw0))"
	[ $((bw1 - bw0)) -ge $((4 << 20)) ] ||
		fail "the kept 4 MiB file was not written back (grew by $((bw1 - bw0)))"
	[ $((bw1 - bw0)) -lt $((8 << 20)) ] ||
		fail "the deleted temporary file was written back (grew by $((bw1 - bw0)))"
fi
[ ! -e "$B/obj/tmp.o" ] || fail "the deleted file is in the backing directory"
cmp "$ZR_TMP/keep" "$B/obj/keep.o" || fail "kept file not in the backing directory"

say "an open file, unlinked, stays readable until closed"
cp "$ZR_TMP/open" "$M/obj/open.o"
exec 3<"$M/obj/open.o"
rm "$M/obj/open.o"
[ ! -e "$M/obj/open.o" ] || fail "unlinked file still has its name"
zr_ctl drop_clean
zr_drop_kcache
cmp "$ZR_TMP/open" /dev/fd/3 || fail "the open unlinked file is not readable"
if zr_stats_on; then
	f=$(zr_stat files)
fi
say "the same with its data written back (clean) before the unlink"
cp "$ZR_TMP/keep" "$M/obj/open2.o"
zr_ctl writeback all
exec 4<"$M/obj/open2.o"
rm "$M/obj/open2.o"
zr_ctl drop_clean
zr_drop_kcache
cmp "$ZR_TMP/keep" /dev/fd/4 || fail "the open unlinked file with clean data is not readable"
exec 4<&-
exec 3<&-
if zr_stats_on; then
	sleep 0.5
	say "files $f with the open unlinked file, $(zr_stat files) after closing it"
	[ "$(zr_stat files)" -lt "$f" ] || fail "closing the unlinked file did not release it"
fi
zr_umount
[ "$(find "$B" -type f | wc -l)" = 1 ] || fail "backing directory holds $(find "$B" -type f | wc -l) files, expected only keep.o"
