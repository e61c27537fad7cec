#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stream_direct: a stream whose blocks get no copy in the tier (random data
# through a small budget) goes to the backing file with O_DIRECT, so that it
# is not copied into the backing filesystem's page cache as well as the
# mount's: bytes_written_direct grows by most of it and `fincore` finds few
# of the backing file's pages cached. A stream that compresses and fits
# stays buffered (the tier copies its blocks back from that page cache), and
# so does a stream onto a backing filesystem that has no direct I/O (tmpfs
# takes O_DIRECT and caches all the same; statx gives it no DIO alignment).
# Mixed in: overwrites while the stream's blocks are on disk, WRITEs that
# start and end mid-block, and copy_file_range within the mount (its data
# sits in the thread's reply buffer, which direct writes also use). Every
# file is compared with the same operations done on a plain file: through
# the mount, after the clean blocks and the page cache are dropped, in the
# backing directory after unmount, and after a remount.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_tool fincore
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
head -c $((48 << 20)) /dev/urandom >"$ZR_TMP/random"
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort |
	xargs -r cat 2>/dev/null | head -c $((16 << 20)) >"$ZR_TMP/text" || true
[ "$(stat -c %s "$ZR_TMP/text")" -gt $((4 << 20)) ] || fail "too little text under /usr/include"

# copy_file_range IN OUT OFF_IN OFF_OUT LEN, in 1 MiB calls (each a
# COPY_FILE_RANGE request when both files are on the mount)
cfr() {
	python3 - "$@" <<'PY'
import os, sys
src, dst, oi, oo, n = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
fi = os.open(src, os.O_RDONLY)
fo = os.open(dst, os.O_WRONLY | os.O_CREAT, 0o644)
while n > 0:
    k = os.copy_file_range(fi, fo, min(n, 1 << 20), oi, oo)
    if k <= 0:
        sys.exit("copy_file_range returned %d with %d bytes left" % (k, n))
    oi += k; oo += k; n -= k
os.close(fi); os.close(fo)
PY
}

if zr_stats_on; then
	say "a stream that compresses and fits: buffered, and copied into the tier"
	zr_mount "size=512M,seq_cutoff=1m" "$B" "$M"
	d0=$(zr_stat bytes_written_direct) c0=$(zr_stat stream_copies)
	dd if="$ZR_TMP/text" of="$ZR_MNT/t" bs=1M conv=fdatasync status=none
	sleep 1
	d1=$(zr_stat bytes_written_direct) c1=$(zr_stat stream_copies)
	say "bytes_written_direct $d0 -> $d1, stream_copies $c0 -> $c1"
	[ "$d1" = "$d0" ] || fail "a compressible stream that fits went to the backing file with O_DIRECT ($((d1 - d0)) bytes)"
	[ "$c1" -gt "$c0" ] || fail "the compressible stream was not copied into the tier"
	cmp "$ZR_MNT/t" "$ZR_TMP/text" || fail "the compressible stream reads back wrong"
	zr_umount
fi

# Whether the filesystem of $B does direct I/O: a page written there with
# O_DIRECT is not left in the page cache.
dd if="$ZR_TMP/random" of="$B/.probe" bs=64k count=4 oflag=direct status=none 2>/dev/null &&
	[ "$(fincore -b -n -o RES "$B/.probe" | tr -d ' ')" = 0 ] && direct_fs=1 || direct_fs=0
rm -f "$B/.probe"
[ $direct_fs = 1 ] || say "$(stat -f -c %T "$B") under $ZR_TMP does no direct I/O: the O_DIRECT checks are left out"

if zr_stats_on && [ "$(id -u)" = 0 ]; then
	say "a backing directory on tmpfs: no O_DIRECT"
	zr_mount_tmpfs "$ZR_TMP/tb" 64M
	zr_mount "size=8M,seq_cutoff=1m" "$ZR_TMP/tb" "$M"
	dd if="$ZR_TMP/random" of="$ZR_MNT/r" bs=1M count=24 conv=fdatasync status=none
	d=$(zr_stat bytes_written_direct)
	[ "$d" = 0 ] || fail "$d bytes went with O_DIRECT to a backing directory on tmpfs"
	cmp "$ZR_MNT/r" <(head -c $((24 << 20)) "$ZR_TMP/random") || fail "the stream onto tmpfs reads back wrong"
	zr_umount
	cmp "$ZR_TMP/tb/r" <(head -c $((24 << 20)) "$ZR_TMP/random") || fail "the stream onto tmpfs is wrong on disk"
	umount "$ZR_TMP/tb"
fi

zr_mount "size=8M,seq_cutoff=1m" "$B" "$M"
M=$ZR_MNT
say "48 MiB of random data through an 8 MiB budget"
d0=$(zr_stat bytes_written_direct)
cp "$ZR_TMP/random" "$R/r"
dd if="$ZR_TMP/random" of="$M/r" bs=1M conv=fdatasync status=none
if zr_stats_on && [ $direct_fs = 1 ]; then
	d1=$(zr_stat bytes_written_direct)
	say "bytes_written_direct $d0 -> $d1"
	[ $((d1 - d0)) -ge $((32 << 20)) ] ||
		fail "only $((d1 - d0)) bytes of the 48 MiB stream went with O_DIRECT"
	res=$(fincore -b -n -o RES "$B/r" | tr -d ' ')
	say "fincore: $res bytes of the backing file are cached"
	[ "$res" -lt $((16 << 20)) ] ||
		fail "$res bytes of the backing file are in the page cache after a direct stream"
fi

say "overwrites into the stream's blocks, then WRITEs that start and end mid-block"
for off in 1 100 4097 20000 40000 49000; do
	for d in "$M" "$R"; do
		printf 'OVERWRITE-%06d' "$off" | dd of="$d/r" bs=1k seek="$off" conv=notrunc status=none
	done
done
# 96 KiB O_DIRECT writes: a WRITE each, every other one mid-block
dd if="$ZR_TMP/random" of="$M/r" bs=96k count=100 skip=3 seek=50 oflag=direct conv=notrunc status=none
dd if="$ZR_TMP/random" of="$R/r" bs=96k count=100 skip=3 seek=50 conv=notrunc status=none
# and a stream that goes on past the end
dd if="$ZR_TMP/random" of="$M/r" bs=1M count=8 skip=5 seek=44 conv=notrunc,fdatasync status=none
dd if="$ZR_TMP/random" of="$R/r" bs=1M count=8 skip=5 seek=44 conv=notrunc status=none
cmp "$M/r" "$R/r" || fail "r differs from the reference"

say "copy_file_range within the mount, to an aligned and to an unaligned offset"
cfr "$M/r" "$M/c" 0 0 $((24 << 20))
cfr "$R/r" "$R/c" 0 0 $((24 << 20))
cfr "$M/r" "$M/c" $((3 << 20)) $(((24 << 20) + 1000)) $((8 << 20))
cfr "$R/r" "$R/c" $((3 << 20)) $(((24 << 20) + 1000)) $((8 << 20))
cmp "$M/c" "$R/c" || fail "c differs from the reference"

if zr_stats_on; then
	zr_ctl drop_clean
	echo 3 >/proc/sys/vm/drop_caches
	for f in r c; do cmp "$M/$f" "$R/$f" || fail "$f differs after drop_clean"; done
fi
zr_umount
for f in r c; do cmp "$B/$f" "$R/$f" || fail "the backing file of $f differs after unmount"; done
zr_mount "" "$B" "$M"
for f in r c; do cmp "$ZR_MNT/$f" "$R/$f" || fail "$f differs after a remount"; done
zr_umount
say "ok"
