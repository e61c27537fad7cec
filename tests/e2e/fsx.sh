#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fsx: the zr_fsx exerciser (random writes, reads, truncates, hole punches,
# fallocate, mmap, copy_file_range, fsync, reopen, page-cache drops) on a
# file of up to 8 MiB with a 4 MiB budget, so that blocks cycle between the
# tier and the backing file while the writeback thread (dirty_expire=200ms)
# races with the operations.  Every read is compared with the model in
# zr_fsx; after an unmount the backing file and, after a remount, the file
# must equal the model's final content.
#
# Cases: block_size=16k; the default block size; cache=writethrough;
# policy=lru (all with O_DIRECT writes on a second descriptor);
# SEEK_DATA/SEEK_HOLE checks (every non-zero byte lies in data); O_DIRECT
# reads;
# a second run on an existing file and `echo hi >file` over a 100000-byte
# file (open with O_TRUNC must truncate it).
# Each case runs to the end and the failures are listed together, so one
# bug does not hide another.  To reproduce a failure by hand, run the
# zr_fsx command it prints against a mount with the same options; -X turns
# operations off to tell bugs apart.
#
# Environment: ZR_FSX_OPS (operations per case, default 20000), ZR_FSX_SEED
# (added to every case's seed, default 0; a longer run by hand can vary it).
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=300	# (68 s alone, 120 s was reached beside fsx_stress in make -j2 check)
zr_init
FSX=$(zr_helper zr_fsx)

B=$ZR_TMP/backing M=$ZR_TMP/mnt D=$ZR_TMP/model
mkdir -p "$B" "$M" "$D"
FAILED=()
NOPS=${ZR_FSX_OPS:-20000}
HALF=$((NOPS / 2))
SEED=${ZR_FSX_SEED:-0}
case $SEED in ''|*[!0-9]*) fail "ZR_FSX_SEED must be a number: '$SEED'" ;; esac

# fsx_case NAME MOUNTOPTS FSXARGS...: mount, run zr_fsx on file NAME with a
# model dump, unmount, compare the backing file, remount with default
# options and compare the file.  Failures are recorded, not fatal.
fsx_case() {
	local name=$1 opts=$2 rc=0
	shift 2
	say "case $name: mount -o $opts; zr_fsx $* FILE"
	zr_mount "$opts" "$B" "$M"
	"$FSX" "$@" -D "$D/$name" "$ZR_MNT/$name" 2>"$ZR_TMP/$name.err" || rc=$?
	if [ "$rc" != 0 ]; then
		head -n 60 "$ZR_TMP/$name.err" | sed 's/^/     /' >&2
		FAILED+=("$name: zr_fsx exited $rc (zr_fsx $* FILE on -o $opts)")
	fi
	zr_umount
	if [ -f "$D/$name" ]; then
		cmp "$D/$name" "$B/$name" ||
			FAILED+=("$name: the backing file differs from the model after unmount")
		zr_mount "" "$B" "$M"
		cmp "$D/$name" "$ZR_MNT/$name" ||
			FAILED+=("$name: the file differs from the model after remount")
		zr_umount
	fi
	[ "$rc" = 0 ] && say "ok: $name"
	return 0
}

COMMON=(-N "$NOPS" -l 8m -o 64k -m -c -d)
# SEEK_DATA/SEEK_HOLE and O_DIRECT reads have cases of their own below, so
# that a failure there does not stop the data checks of the others.
fsx_case bs16k "size=4M,block_size=16k,dirty_expire=200ms" \
	"${COMMON[@]}" -b 16k -S $((SEED + 1)) -X seek,dread
fsx_case bs64k "size=4M,dirty_expire=200ms" \
	"${COMMON[@]}" -b 64k -S $((SEED + 2)) -X seek,dread
fsx_case writethrough "size=4M,block_size=16k,cache=writethrough,dirty_expire=200ms" \
	-N "$HALF" -l 8m -o 64k -m -c -d -b 16k -S $((SEED + 3)) -X seek,dread
fsx_case lru "size=4M,block_size=16k,policy=lru,dirty_expire=200ms" \
	-N "$HALF" -l 8m -o 64k -m -c -d -b 16k -S $((SEED + 4)) -X seek,dread
fsx_case seek "size=4M,block_size=16k,dirty_expire=200ms" \
	-N 5000 -l 8m -o 64k -m -c -b 16k -S $((SEED + 5))
# O_DIRECT reads next to buffered writes that extend the file (as on ext4,
# the hole between the old and the new end must read as zeros, not EOF).
fsx_case odirect "size=4M,block_size=16k,dirty_expire=200ms" \
	-N 5000 -l 8m -o 64k -m -c -d -b 16k -S $((SEED + 7)) -X seek

# The file of case bs16k exists with 0..8 MiB of data: zr_fsx opens it with
# O_TRUNC, which must empty it (libfuse passes O_TRUNC to open, no setattr).
if [ -f "$D/bs16k" ]; then
	mv "$B/bs16k" "$B/again"
	fsx_case again "size=4M,block_size=16k,dirty_expire=200ms" \
		-N 3000 -l 8m -o 64k -m -c -b 16k -S $((SEED + 6)) -X seek,dread
fi

# The same without zr_fsx, deterministic: `echo hi >file` over a file the
# daemon has open and cached must leave 3 bytes.
say "case otrunc: open(O_TRUNC) of a file with cached blocks"
zr_mount "size=4M,block_size=16k" "$B" "$M"
head -c 100000 /dev/urandom >"$ZR_MNT/otrunc"
sync "$ZR_MNT/otrunc"
echo hi >"$ZR_MNT/otrunc"
zr_umount
if [ "$(stat -c %s "$B/otrunc")" != 3 ] || [ "$(head -c 2 "$B/otrunc")" != hi ]; then
	FAILED+=("otrunc: after 'echo hi >file' and unmount the backing file has $(stat -c %s "$B/otrunc") bytes, expected 3")
else
	say "ok: otrunc"
fi

if [ ${#FAILED[@]} -gt 0 ]; then
	printf '  failed: %s\n' "${FAILED[@]}" >&2
	fail "${#FAILED[@]} check(s) failed"
fi
say "ok: all cases match the model"
