#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# stream_direct: a stream past seq_cutoff that the tier will not keep (the
# data does not compress, or the tier is tight) goes to the backing file
# with O_DIRECT: the kernel holds it in the mount's page cache already, and
# a second copy in the backing file's page cache would be RAM spent twice.
# bytes_written_direct counts it and the backing file's page cache does not
# hold it. A stream that compresses, into a tier with room, still goes
# through the page cache (its blocks are copied into the tier from there).
# WRITEs that start mid-block mix both ways in one file. A backing
# filesystem without direct I/O gets the stream through its page cache
# (tmpfs, which takes O_DIRECT but caches all the same). Every file reads
# back as written, through the mount and in the backing directory after
# the unmount. stream_direct=off keeps streams in the backing page cache.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=180
zr_init
zr_stats_on || zr_skip "needs the daemon's statistics (ZR_E2E_NOMOUNT or NOSTATS)"
zr_need_tool fincore

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
case $(stat -f -c %T "$ZR_TMP") in
ext2/ext3 | ext4 | xfs) ;;
*)
	# a disk filesystem for the backing directory: one in a file
	zr_need_root "mounts an ext4 image for the backing directory (its filesystem is $(stat -f -c %T "$ZR_TMP"))"
	zr_need_tool mkfs.ext4
	truncate -s 400M "$ZR_TMP/ext4.img" && mkfs.ext4 -q -F "$ZR_TMP/ext4.img" ||
		fail "cannot make an ext4 image"
	mount -o loop "$ZR_TMP/ext4.img" "$B" || zr_skip "cannot mount an ext4 image on a loop device"
	;;
esac
head -c $((96 << 20)) /dev/urandom >"$ZR_TMP/random"
head -c $((48 << 20)) "$ZR_TMP/random" >"$ZR_TMP/r48"
find /usr/include -type f -name '*.h' -readable 2>/dev/null | LC_ALL=C sort |
	xargs -r cat 2>/dev/null | head -c $((8 << 20)) >"$ZR_TMP/text1" || true
[ "$(stat -c %s "$ZR_TMP/text1")" -gt $((1 << 20)) ] || fail "too little text under /usr/include"
for i in 1 2 3 4; do cat "$ZR_TMP/text1"; done | head -c $((32 << 20)) >"$ZR_TMP/text"

# resident FILE: bytes of FILE in the page cache
resident() {
	fincore -b -n -o RES "$1" | awk '{ print $1 }'
}

# learn_raw FILE: streams the first 16 MiB of the random data to FILE. Its
# first MiB (seq_cutoff) goes into the tier, where the file is found not to
# compress (16 whole blocks in a row, ZR_RAW_RUN: one in 16 is compressed
# at once, and every one after a block that did not compress); a copy of a
# bypassed block, made by the fill thread, may find it too. Then the rest
# of the stream can go with O_DIRECT.
learn_raw() {
	dd if="$ZR_TMP/random" of="$1" bs=1M count=16 status=none
	zr_wait_settled 10 || fail "blocks still wait to be compressed after 10 s"
	sleep 0.5
}

zr_mount "size=256M,seq_cutoff=1m" "$B" "$M"
M=$ZR_MNT

say "96 MiB of random data, streamed"
d0=$(zr_stat bytes_written_direct)
learn_raw "$M/r"
dd if="$ZR_TMP/random" of="$M/r" bs=1M skip=16 seek=16 conv=fdatasync,notrunc status=none
d1=$(zr_stat bytes_written_direct)
say "bytes_written_direct: $((d1 - d0))"
[ $((d1 - d0)) -ge $((72 << 20)) ] ||
	fail "only $((d1 - d0)) bytes of the last 80 MiB of the random stream went around the backing page cache"
res=$(resident "$B/r")
say "backing page cache holds $res bytes of r"
[ "$res" -le $(((96 << 20) - (d1 - d0) + (4 << 20))) ] ||
	fail "the backing page cache holds $res bytes of the streamed file, of which $((d1 - d0)) went with O_DIRECT"

say "32 MiB of text, streamed into a tier with room"
d0=$(zr_stat bytes_written_direct) c0=$(zr_stat stream_copies)
dd if="$ZR_TMP/text" of="$M/t" bs=1M conv=fdatasync status=none
sleep 1
d1=$(zr_stat bytes_written_direct) c1=$(zr_stat stream_copies)
say "bytes_written_direct: $((d1 - d0)), stream_copies: $((c1 - c0))"
[ $((d1 - d0)) -eq 0 ] || fail "$((d1 - d0)) bytes of a stream the tier keeps went with O_DIRECT"
[ $((c1 - c0)) -ge 400 ] || fail "only $((c1 - c0)) blocks of the text stream were copied into the tier"

say "random data in 96 KiB O_DIRECT writes: WRITEs that start mid-block"
learn_raw "$M/m"
d0=$(zr_stat bytes_written_direct) w0=$(zr_stat writes_direct)
dd if="$ZR_TMP/random" of="$M/m" bs=96k count=512 iflag=skip_bytes skip=$((16 << 20)) \
	oflag=direct,seek_bytes seek=$((16 << 20)) conv=notrunc status=none
d1=$(zr_stat bytes_written_direct) w1=$(zr_stat writes_direct)
say "bytes_written_direct: $((d1 - d0)) in $((w1 - w0)) writes"
[ $((d1 - d0)) -ge $((24 << 20)) ] ||
	fail "only $((d1 - d0)) bytes of whole blocks in mid-block WRITEs went with O_DIRECT"
# each WRITE covers a block and half of one (in 64 KiB blocks): one
# direct write each, not one per piece
[ $((w1 - w0)) -ge 256 ] && [ $((w1 - w0)) -le 560 ] ||
	fail "the 512 WRITEs took $((w1 - w0)) O_DIRECT writes (one each expected)"
head -c $(((16 << 20) + (512 * 96 << 10))) "$ZR_TMP/random" >"$ZR_TMP/m.ref"

say "a stream 1000 bytes past the end of r, in O_DIRECT writes at unaligned offsets"
# the payload must move by an amount that is not a multiple of 4 KiB
d0=$(zr_stat bytes_written_direct)
head -c $((24 << 20)) /dev/urandom >"$ZR_TMP/random2"
dd if="$ZR_TMP/random2" of="$M/r" bs=1M oflag=direct,seek_bytes seek=$(((96 << 20) + 1000)) \
	conv=notrunc status=none
d1=$(zr_stat bytes_written_direct)
say "bytes_written_direct: $((d1 - d0))"
[ $((d1 - d0)) -ge $((16 << 20)) ] ||
	fail "only $((d1 - d0)) bytes of the unaligned stream went with O_DIRECT"
{ cat "$ZR_TMP/random"; head -c 1000 /dev/zero; cat "$ZR_TMP/random2"; } >"$ZR_TMP/r.ref"

zr_drop_kcache
zr_ctl drop_clean
cmp "$M/r" "$ZR_TMP/r.ref" || fail "r differs through the mount"
cmp "$M/t" "$ZR_TMP/text" || fail "t differs through the mount"
cmp "$M/m" "$ZR_TMP/m.ref" || fail "m differs through the mount"
zr_umount
cmp "$B/r" "$ZR_TMP/r.ref" || fail "the backing file of r differs"
cmp "$B/t" "$ZR_TMP/text" || fail "the backing file of t differs"
cmp "$B/m" "$ZR_TMP/m.ref" || fail "the backing file of m differs"

say "stream_direct=off: the same stream stays in the backing page cache"
zr_mount "size=256M,seq_cutoff=1m,stream_direct=off" "$B" "$M"
M=$ZR_MNT
[ "$(zr_config stream_direct)" = off ] || fail "config says stream_direct $(zr_config stream_direct)"
learn_raw "$M/r2"
dd if="$ZR_TMP/random" of="$M/r2" bs=1M count=32 skip=16 seek=16 conv=fdatasync,notrunc status=none
res=$(resident "$B/r2")
say "bytes_written_direct: $(zr_stat bytes_written_direct), backing page cache holds $res bytes of r2"
[ "$(zr_stat bytes_written_direct)" -eq 0 ] || fail "bytes_written_direct grew with stream_direct=off"
[ "$res" -ge $((32 << 20)) ] || fail "the backing page cache holds only $res bytes of r2"
zr_umount
cmp "$B/r2" "$ZR_TMP/r48" || fail "the backing file of r2 differs"

say "a backing ext4 that fills up under a stream going with O_DIRECT"
zr_need_root "mounts an ext4 image"
zr_need_tool mkfs.ext4
mkdir -p "$ZR_TMP/small"
truncate -s 64M "$ZR_TMP/small.img" && mkfs.ext4 -q -F "$ZR_TMP/small.img" ||
	fail "cannot make an ext4 image"
mount -o loop "$ZR_TMP/small.img" "$ZR_TMP/small" || zr_skip "cannot mount an ext4 image on a loop device"
avail=$(($(stat -f -c '%a * %S' "$ZR_TMP/small")))
head -c $((avail - (32 << 20))) /dev/zero >"$ZR_TMP/small/filler" || fail "cannot write the filler"
sync -f "$ZR_TMP/small/filler"
zr_mount "size=256M,seq_cutoff=1m,dirty_expire=1h" "$ZR_TMP/small" "$M"
M=$ZR_MNT
learn_raw "$M/f"
d0=$(zr_stat bytes_written_direct)
if dd if="$ZR_TMP/random" of="$M/f" bs=1M count=32 skip=16 seek=16 conv=fdatasync,notrunc \
	status=none 2>"$ZR_TMP/dd.err"; then
	fail "48 MiB into 32 MiB of room: the fdatasync did not fail"
fi
say "dd: $(cat "$ZR_TMP/dd.err")"
grep -q 'No space left' "$ZR_TMP/dd.err" || fail "dd did not fail with ENOSPC"
say "bytes_written_direct: $(($(zr_stat bytes_written_direct) - d0)), blocks_dirty: $(zr_stat blocks_dirty)"
[ $(($(zr_stat bytes_written_direct) - d0)) -ge $((8 << 20)) ] ||
	fail "the stream did not go with O_DIRECT before the disk filled up"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no block the disk refused is dirty in the tier"
zr_drop_kcache
cmp "$M/f" "$ZR_TMP/r48" || fail "f differs through the mount while the disk is full"
rm "$ZR_TMP/small/filler"
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "blocks_dirty is $(zr_stat blocks_dirty) after 'writeback all' with room"
zr_umount
cmp "$ZR_TMP/small/f" "$ZR_TMP/r48" || fail "the backing file of f differs once the disk had room"
umount "$ZR_TMP/small" || fail "cannot unmount the ext4 image"

say "a backing filesystem without direct I/O (tmpfs)"
mkdir -p "$ZR_TMP/mnt2"
zr_mount_tmpfs "$ZR_TMP/tmpfs" 128M
zr_mount "size=64M,seq_cutoff=1m" "$ZR_TMP/tmpfs" "$ZR_TMP/mnt2"
M=$ZR_MNT
learn_raw "$M/r"
dd if="$ZR_TMP/random" of="$M/r" bs=1M count=32 skip=16 seek=16 conv=fdatasync,notrunc status=none
say "bytes_written_direct: $(zr_stat bytes_written_direct), bytes_written_backing: $(zr_stat bytes_written_backing)"
[ "$(zr_stat bytes_written_direct)" -eq 0 ] || fail "bytes_written_direct grew on tmpfs"
[ "$(zr_stat bytes_written_backing)" -ge $((32 << 20)) ] ||
	fail "the stream did not go to the backing file"
grep -q 'through their page cache' "$ZR_LOG" ||
	fail "the daemon did not say that streams go through the backing page cache"
zr_drop_kcache
cmp "$M/r" "$ZR_TMP/r48" || fail "r on tmpfs differs through the mount"
zr_umount
cmp "$ZR_TMP/tmpfs/r" "$ZR_TMP/r48" || fail "the backing file of r on tmpfs differs"
say "ok"
