#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fallocate_fail_race: a failed fallocate(2) gives back the space it took
# past the backing file's end with a truncate of the backing file to its
# own size (fstat, then ftruncate). With cache=none a WRITE goes straight
# to the backing file: one that extends it between that fstat and that
# ftruncate (a flush of the kernel's cache, which a fallocate does not
# wait for) was cut back, its data gone after its fsync had succeeded.
# The backing directory is a 64 MiB ext4 image, which keeps what a
# fallocate of 200 MiB allocated before ENOSPC. A page of the extension
# (into space reserved past the end before: the filesystem is full
# meanwhile) is flushed with sync_file_range(2), and the fallocate sent
# while its WRITE is served (Linux 6.18 holds the inode lock for a
# fallocate, which a flush does not take); zr_fault.so holds the WRITE's
# pwrite for 500 ms and the give back's ftruncate for 1 s.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the delay is injected into the daemon"
zr_need_root "mounts an ext4 image"
zr_need_tool losetup mkfs.ext4 fallocate python3
FAULT=$(zr_helper zr_fault.so)

E=$ZR_TMP/ext4 IMG=$ZR_TMP/ext4.img M=$ZR_TMP/mnt
LOOP=
ZR_ATEXIT+=('if [ -n "$LOOP" ]; then umount "$E" 2>/dev/null; losetup -d "$LOOP" || echo "cleanup: cannot detach $LOOP" >&2; fi; rm -f "$IMG"')
mkdir -p "$E" "$M"
truncate -s 64M "$IMG"
mkfs.ext4 -q -F "$IMG" >"$ZR_TMP/mkfs.log" 2>&1 || { cat "$ZR_TMP/mkfs.log" >&2; fail "mkfs.ext4 failed"; }
LOOP=$(losetup -f --show "$IMG") || fail "cannot attach $IMG to a loop device"
mount -t ext4 "$LOOP" "$E" || fail "cannot mount $LOOP"
B=$E/backing
mkdir "$B"

head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/head"
head -c 65536 /dev/urandom >"$ZR_TMP/tail"
cat "$ZR_TMP/head" "$ZR_TMP/tail" >"$ZR_TMP/want"

ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=f ZR_FAULT_FTRUNCATE_DELAY_MS=1000 \
	ZR_FAULT_PWRITE_ARMED=$ZR_TMP/pw_armed ZR_FAULT_PWRITE_DELAY_MS=500 \
	zr_mount_fault "cache=none" "$B" "$M"
M=$ZR_MNT

cp "$ZR_TMP/head" "$M/f"
sync "$M/f"
[ "$(stat -c %s "$B/f")" = $((1 << 20)) ] || fail "the backing file is not 1 MiB"

say "a failed fallocate of 200 MiB while an extension is flushed"
fallocate --keep-size -o 1M -l 64K "$M/f" || fail "cannot reserve 64 KiB past the end"
python3 - "$M/f" "$ZR_TMP/tail" "$ZR_TMP/armed" "$ZR_TMP/pw_armed" <<'PY' || fail "the writer failed"
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_uint]
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
path, tail = sys.argv[1], open(sys.argv[2], 'rb').read()
fd = os.open(path, os.O_WRONLY)
assert os.pwrite(fd, tail, 1 << 20) == len(tail)	# into the kernel's cache
for armed in sys.argv[3:5]:
    open(armed, 'w').close()
# SYNC_FILE_RANGE_WRITE: the WRITE is sent, not waited for
if libc.sync_file_range(fd, 0, 0, 2) != 0:
    sys.exit("sync_file_range: " + os.strerror(ctypes.get_errno()))
time.sleep(0.1)	# (the daemon holds its pwrite)
# (from this process: a close, a child's of this fd too, would wait for
# the flush) FALLOC_FL_KEEP_SIZE
if libc.fallocate(fd, 1, 2 << 20, 200 << 20) == 0:
    sys.exit("the fallocate of 200 MiB did not fail: the case is not tested")
print("     fallocate: " + os.strerror(ctypes.get_errno()))
os.fsync(fd)
os.close(fd)
PY
[ ! -e "$ZR_TMP/pw_armed" ] || fail "the WRITE's pwrite was not held: the case is not tested"
[ ! -e "$ZR_TMP/armed" ] || fail "the give back's ftruncate was not held: the case is not tested"
zr_umount
size=$(stat -c %s "$B/f")
[ "$size" = $((1 << 20 | 65536)) ] ||
	fail "the backing file is $size bytes after a write to $((1 << 20 | 65536)) and its fsync succeeded"
cmp "$ZR_TMP/want" "$B/f" || fail "the backing file's data differ from what was written"
say "ok: the extension flushed during the give back is whole"
