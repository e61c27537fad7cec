#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# seek_refused: SEEK_DATA/SEEK_HOLE agree with read() after the daemon
# refused WRITEs of the kernel's cache. A 4 MiB budget over an 8 MiB tmpfs;
# a writer puts 12 MiB of random data in every other MiB of a file and
# closes it: the writeback WRITEs that fit nowhere are refused (ENOSPC,
# which the writer's close reports), and the kernel keeps their pages,
# clean, in its cache. Once the tmpfs is grown, a reader (no writer open)
# walks the file with SEEK_DATA/SEEK_HOLE: every hole it is told of must
# read as zeros. lseek leaves the kernel's cache alone when no writer is
# open (5221bd6), and then reported holes over those pages, which read as
# data (helper-83); a refused WRITE now has the next lseek drop them.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the refused WRITEs and lseek's answer are the daemon's"
zr_need_root "mounts a tmpfs"
zr_need_tool python3
SEEK=$(zr_helper zr_seek)

B=$ZR_TMP/backing
zr_mount_cramped "$B" "$ZR_TMP/mnt"
M=$ZR_MNT

say "12 MiB of random data, every other MiB, over a budget and a disk that cannot take it"
head -c 12M /dev/urandom >"$ZR_TMP/src"
zr_write_refused "$M/f" "$ZR_TMP/src"
mount -o remount,size=64m "$B" || fail "cannot grow the backing tmpfs"

say "a reader walks the holes"
seg=$("$SEEK" "$M/f") || fail "SEEK_DATA/SEEK_HOLE failed: $seg"
# the holes: the gaps before, between and after the data segments
holes=$(echo "$seg" | awk '$1 == "data" { if ($2 > p) print p, $2; p = $3 }
	$1 == "size" && $2 > p { print p, $2 }')
n=0 bad=0
while read -r a b; do
	n=$((n + 1))
	if ! cmp -s -i "$a:0" -n $((b - a)) "$M/f" /dev/zero; then
		say "hole [$a, $b) reported, but it reads as data"
		bad=$((bad + 1))
	fi
done <<<"$holes"
say "$n holes reported, $bad over data"
[ -n "$holes" ] || fail "no hole reported in a file written in every other MiB"
[ "$bad" = 0 ] || fail "SEEK_HOLE reported a hole where read() finds data"
zr_umount
say "ok: the holes reported read as zeros"
