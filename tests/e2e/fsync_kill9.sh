#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fsync_kill9: data that fsync (or fdatasync) has returned for must survive
# kill -9 of the daemon: it is in the backing directory right after the
# kill, and readable after a remount.  Writeback is held back with
# dirty_expire=1h, so only the fsyncs can have written it.  Blocks
# rewritten with zero tails reach the disk with their zeros.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "kills the daemon"
IO=$(zr_helper zr_io)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/sub" "$M"
head -c $((8 << 20)) /dev/urandom >"$ZR_TMP/a"
head -c $((5 << 20)) /dev/urandom >"$ZR_TMP/c"
head -c $((3 << 20)) /dev/urandom >"$ZR_TMP/d"
# f: 256 KiB of text, then four 64 KiB blocks of 3000 bytes of text each
# and zeros (a written block is stored without its zero tail until the
# fill thread compresses it: the zeros must reach the disk all the same)
cat /usr/include/*.h 2>/dev/null | head -c $((256 << 10)) >"$ZR_TMP/f0" || true
[ "$(stat -c %s "$ZR_TMP/f0")" = $((256 << 10)) ] || zr_skip "too few C headers for text data"
for i in 0 1 2 3; do
	dd if="$ZR_TMP/f0" bs=1000 skip=$((i * 7)) count=3 status=none
	head -c $((65536 - 3000)) /dev/zero
done >"$ZR_TMP/f1"
zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

say "a: 8 MiB, dd conv=fsync"
dd if="$ZR_TMP/a" of="$M/sub/a" bs=1M conv=fsync status=none || fail "dd conv=fsync failed"
say "b: 2 MiB, dd conv=fdatasync"
dd if="$ZR_TMP/a" of="$M/b" bs=64k count=32 conv=fdatasync status=none || fail "dd conv=fdatasync failed"
say "c: 4 MiB fsynced, then 1 MiB more not synced"
head -c $((4 << 20)) "$ZR_TMP/c" >"$M/c"
"$IO" fsync "$M/c" >/dev/null || fail "fsync of c failed"
tail -c $((1 << 20)) "$ZR_TMP/c" >>"$M/c"
say "d: 3 MiB fsynced, truncated to 1 MiB, fsynced"
cp "$ZR_TMP/d" "$M/d"
"$IO" fsync "$M/d" >/dev/null || fail "fsync of d failed"
truncate -s $((1 << 20)) "$M/d"
"$IO" fsync "$M/d" >/dev/null || fail "fsync of truncated d failed"
say "f: 256 KiB fsynced, then each block rewritten with a zero tail, fsynced"
cp "$ZR_TMP/f0" "$M/f"
"$IO" fsync "$M/f" >/dev/null || fail "fsync of f failed"
dd if="$ZR_TMP/f1" of="$M/f" bs=64k conv=notrunc,fsync status=none ||
	fail "dd conv=notrunc,fsync of f failed"
say "e: not synced at all"
head -c $((2 << 20)) /dev/urandom >"$M/e"

say "kill -9 the daemon"
zr_kill9

check() {
	local d=$1
	cmp "$ZR_TMP/a" "$d/sub/a" || fail "fsynced file a differs ($2)"
	cmp -n $((2 << 20)) "$ZR_TMP/a" "$d/b" || fail "fdatasynced file b differs ($2)"
	[ "$(stat -c %s "$d/b")" = $((2 << 20)) ] || fail "b has the wrong size ($2)"
	cmp -n $((4 << 20)) "$ZR_TMP/c" "$d/c" || fail "fsynced 4 MiB of c differ ($2)"
	[ "$(stat -c %s "$d/c")" -ge $((4 << 20)) ] || fail "c is shorter than what was fsynced ($2)"
	[ "$(stat -c %s "$d/d")" = $((1 << 20)) ] || fail "d is $(stat -c %s "$d/d") bytes, fsynced 1 MiB ($2)"
	cmp -n $((1 << 20)) "$ZR_TMP/d" "$d/d" || fail "fsynced d differs ($2)"
	[ -e "$d/e" ] || fail "e (created, not synced) has no name ($2)"
	cmp "$ZR_TMP/f1" "$d/f" || fail "f, rewritten with zero tails and fsynced, differs ($2)"
	say "ok: fsynced data intact ($2)"
}
check "$B" "backing directory right after kill -9"
zr_mount "" "$B" "$M"
check "$ZR_MNT" "after remount"
zr_umount
