#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# truncate_sparse: truncate down and up, extension with a hole past the end,
# hole punching, and a sparse file with data at 1 GiB and 1 TiB.  Every
# operation is repeated on a reference file in a plain directory and the two
# must compare equal while mounted and after a remount.  SEEK_DATA/SEEK_HOLE
# must report the holes (also while the data is only in RAM) and st_blocks
# must be sane (a 1 TiB sparse file does not occupy 1 TiB; a dense file is
# not reported as all holes, which would fool tar and cp).
. "$(dirname "$0")/lib.sh"
zr_init
SEEK=$(zr_helper zr_seek)

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
head -c 300000 /dev/urandom >"$ZR_TMP/rand"
head -c 4096 /dev/urandom >"$ZR_TMP/page1"
head -c 4096 /dev/urandom >"$ZR_TMP/page2"
G=$((1 << 30)) T=$((1 << 40))

zr_mount "size=64M,dirty_expire=1h,block_size=64k" "$B" "$M"
M=$ZR_MNT

# both CMD...: runs CMD with F replaced by the file on the mount and on the
# reference directory.
both() {
	local d
	for d in "$M" "$R"; do
		"${@//@/$d}" || fail "'$*' failed on $d"
	done
}
same() {
	cmp "$R/$1" "$M/$1" || fail "$1 differs from the reference ($2)"
	[ "$(stat -c %s "$R/$1")" = "$(stat -c %s "$M/$1")" ] || fail "$1: size differs ($2)"
}

say "truncate down and up"
both cp "$ZR_TMP/rand" @/t1
both truncate -s 100001 @/t1
same t1 "after truncate to 100001"
both truncate -s 250000 @/t1
same t1 "after truncate up to 250000"
cmp -n 149999 -i 100001:0 "$M/t1" /dev/zero || fail "bytes past the old end are not zero"
both truncate -s 0 @/t1
same t1 "after truncate to 0"
both dd if="$ZR_TMP/rand" of=@/t1 bs=10000 count=3 status=none
same t1 "rewrite after truncate to 0"

say "extend with a hole by writing past the end"
both cp "$ZR_TMP/rand" @/t2
both dd if="$ZR_TMP/page1" of=@/t2 bs=4096 seek=200 conv=notrunc status=none
same t2 "after writing at 800 KiB"
cmp -n $((800 * 1024 - 300000)) -i 300000:0 "$M/t2" /dev/zero ||
	fail "the hole between 300000 and 800 KiB is not zero"

if command -v fallocate >/dev/null; then
	say "punch a hole"
	both fallocate -p -o 65536 -l 131072 @/t2
	same t2 "after punching 64K..192K"
	cmp -n 131072 -i 65536:0 "$M/t2" /dev/zero || fail "punched range is not zero"
	# t3's two blocks are only dirty in RAM (the backing file is empty):
	# punched whole, they go, and the backing file must still reach the
	# file's size once it is fsynced
	say "punch a file whose whole content is dirty in RAM past the backing file's end"
	head -c 131072 "$ZR_TMP/rand" >"$M/t3"
	head -c 131072 "$ZR_TMP/rand" >"$R/t3"
	both fallocate -p -o 0 -l 131072 @/t3
	same t3 "after punching all of it"
	sync "$M/t3"
	[ "$(stat -c %s "$B/t3")" = 131072 ] ||
		fail "the backing file of t3 is $(stat -c %s "$B/t3") bytes after fsync, the file 131072"
else
	say "fallocate absent: hole punching not checked"
fi

say "sparse file: 4 KiB at 1 GiB and at 1 TiB"
both truncate -s 0 @/sparse
both dd if="$ZR_TMP/page1" of=@/sparse bs=4096 seek=$((G / 4096)) conv=notrunc status=none
both dd if="$ZR_TMP/page2" of=@/sparse bs=4096 seek=$((T / 4096)) conv=notrunc status=none
[ "$(stat -c %s "$M/sparse")" = $((T + 4096)) ] || fail "sparse size is $(stat -c %s "$M/sparse")"

# Before Linux 6.16 the daemon leaves SEEK_DATA/SEEK_HOLE to the kernel,
# which reports no holes, once a writer was open at an lseek (see the last
# phase).
OLD_KERNEL=$(uname -r | awk -F. '{ print ($1 < 6 || ($1 == 6 && $2 < 16)) ? 1 : 0 }')

# check_sparse WHEN: contents, blocks and SEEK_DATA/SEEK_HOLE of the sparse
# file.  Data may be reported at block granularity (128 KiB at most).
check_sparse() {
	local f=$M/sparse seg blocks
	dd if="$f" bs=4096 skip=$((G / 4096)) count=1 status=none | cmp - "$ZR_TMP/page1" ||
		fail "data at 1 GiB differs ($1)"
	dd if="$f" bs=4096 skip=$((T / 4096)) count=1 status=none | cmp - "$ZR_TMP/page2" ||
		fail "data at 1 TiB differs ($1)"
	dd if="$f" bs=1M skip=512 count=1 status=none | cmp -n 1048576 - /dev/zero ||
		fail "the hole at 512 MiB does not read as zeros ($1)"
	blocks=$(stat -c %b "$f")
	say "sparse: st_blocks $blocks, du $(du -k "$f" | cut -f1) KiB ($1)"
	[ $((blocks * 512)) -le $((16 << 20)) ] ||
		fail "sparse file occupies $((blocks * 512)) bytes ($1)"
	seg=$("$SEEK" "$f") || fail "SEEK_DATA/SEEK_HOLE failed ($1): $seg"
	echo "$seg" | sed 's/^/     /'
	# (the last phase's case, for real: the kernel answers once a writer
	# was open at an lseek, and the RELEASE of dd's handle may come late)
	[ "$OLD_KERNEL" = 1 ] &&
		[ "$seg" = "$(printf 'data 0 %s\nsize %s' $((T + 4096)) $((T + 4096)))" ] && return
	echo "$seg" | awk -v g=$G -v t=$T -v end=$((T + 4096)) -v k=131072 '
		$1 == "data" { n++; s[n] = $2; e[n] = $3 }
		END {
			if (n != 2) { print "expected 2 data segments, got " n; exit 1 }
			if (s[1] > g || s[1] < g - k || e[1] < g + 4096 || e[1] > g + k) {
				print "first segment " s[1] ".." e[1] " does not match 1 GiB"; exit 1 }
			if (s[2] > t || s[2] < t - k || e[2] != end) {
				print "second segment " s[2] ".." e[2] " does not match 1 TiB"; exit 1 }
		}' || fail "SEEK_DATA/SEEK_HOLE report the wrong segments ($1)"
}
check_sparse "while mounted, data in RAM"

say "dense file: st_blocks not zero"
cp "$ZR_TMP/rand" "$M/dense"
blocks=$(stat -c %b "$M/dense")
[ "$blocks" -gt 0 ] || fail "a 300000-byte file with data reports st_blocks 0"
[ $((blocks * 512)) -le $((300000 + (1 << 20))) ] || fail "dense file st_blocks $blocks too large"
seg=$("$SEEK" "$M/dense")
[ "$(echo "$seg" | head -n 1)" = "data 0 300000" ] ||
	fail "dense file: SEEK_DATA/SEEK_HOLE gives '$seg'"

# An lseek with no handle open for writing leaves the kernel's cache of
# the file alone: it can hold no dirty page then (it used to be dropped,
# and the file read through the daemon again). The RELEASE of cp's
# handle is sent without waiting, so this tries a few times.
if zr_real && command -v fincore >/dev/null 2>&1; then
	say "lseek by a reader keeps the page cache"
	kept=0
	for i in $(seq 50); do
		cat "$M/dense" >/dev/null
		"$SEEK" "$M/dense" >/dev/null || fail "SEEK_DATA/SEEK_HOLE on dense failed"
		res=$(fincore --bytes --noheadings --output RES "$M/dense" | tr -d " ")
		[ "$res" -ge 300000 ] && { kept=1; break; }
		sleep 0.1
	done
	[ "$kept" = 1 ] || fail "the kernel's cache of dense is dropped by every lseek ($res bytes left)"
elif zr_real; then
	say "no fincore (util-linux): the page cache is not checked after an lseek"
fi

zr_ctl writeback all
check_sparse "after writeback all"
zr_umount
for f in t1 t2 sparse; do
	if [ "$f" = sparse ]; then
		[ "$(stat -c %s "$B/sparse")" = $((T + 4096)) ] || fail "backing sparse size wrong"
	else
		cmp "$R/$f" "$B/$f" || fail "backing $f differs from the reference"
	fi
done

zr_mount "" "$B" "$M"
M=$ZR_MNT
same t1 "after remount"
same t2 "after remount"
[ ! -e "$R/t3" ] || same t3 "after remount"
check_sparse "after remount"
zr_umount

# Before Linux 6.16 FUSE ends a page's writeback before its WRITE reaches
# the daemon, which then cannot see every byte of an open file: SEEK_DATA
# and SEEK_HOLE must go to the kernel (all data, no hole), never report a
# hole over data.  zr_fault.so makes uname(2) say 6.1 (Debian 12's).
# Without a handle open for writing the kernel holds no dirty page, and
# the daemon answers from its blocks there too; the first lseek while one
# is open answers ENOSYS, and the kernel answers every lseek after it.
say "a kernel before 6.16 (uname says 6.1): lseek is left to the kernel, no hole reported"
FAULT=$(zr_helper zr_fault.so)
ZR_FAULT_UNAME=6.1.0-28-amd64 zr_mount_fault "" "$B" "$M"
M=$ZR_MNT
seg=$("$SEEK" "$M/sparse") || fail "SEEK_DATA/SEEK_HOLE failed on a 6.1 kernel: $seg"
[ "$(echo "$seg" | grep -c '^data')" = 2 ] ||
	fail "on a 6.1 kernel, with no writer, SEEK_DATA/SEEK_HOLE gave '$seg', want the two data segments"
exec {wfd}>>"$M/sparse"		# a handle open for writing
seg=$("$SEEK" "$M/sparse") || fail "SEEK_DATA/SEEK_HOLE failed on a 6.1 kernel: $seg"
exec {wfd}>&-
[ "$seg" = "$(printf 'data 0 %s\nsize %s' $((T + 4096)) $((T + 4096)))" ] ||
	fail "on a 6.1 kernel, SEEK_DATA/SEEK_HOLE gave '$seg', want the whole file as data"
grep -q "before 6.16" "$ZR_LOG" || fail "the log does not say why lseek is left to the kernel: $(cat "$ZR_LOG")"
dd if="$M/sparse" bs=4096 skip=$((G / 4096)) count=1 status=none | cmp - "$ZR_TMP/page1" ||
	fail "data at 1 GiB differs (6.1 kernel)"
zr_umount
