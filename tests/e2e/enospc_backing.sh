#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# enospc_backing: the backing directory is a 16 MiB tmpfs, the RAM budget is
# larger.  (1) 40 MiB written: the writes fit in RAM and succeed, writeback
# fails with ENOSPC, fsync must report it, writeback_errors counts it, and
# no byte is lost: the data reads back while mounted, and once the tmpfs is
# enlarged `writeback all` succeeds and the backing file is complete after
# unmount.  (2) With an 8 MiB tmpfs and a 16 MiB budget, 64 MiB can fit
# nowhere: the writer must get ENOSPC (from write, fsync or close) instead
# of hanging or losing data silently.  (3) A 4 MiB budget over an 8 MiB
# tmpfs, forty 1 MiB files written without fsync: the kernel flushes them
# from its writeback cache at close; a file whose write() and close() both
# succeeded must be whole, through the mount and on disk once space is
# made (a flush the budget and the disk could not take must fail the close,
# not shorten the file).  (4) A write of a stream that the backing
# directory takes only in part (ENOSPC partway), and that the full tier
# cannot take either, fails, and leaves nothing past the file's end in the
# backing file: a later truncate up must read zeros there.  (5) A reader's
# lseek(SEEK_DATA) and close() while the writeback fails do not take the
# file's error (the kernel sends FLUSH at every close, a reader's too),
# nor does a reader's fsync() once there is room again (its writeback
# succeeds, and it reports that): the writer's close() still reports it.
# (6) statfs of the mount counts
# the dirty data still in RAM as taken in the backing filesystem.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "writeback errors come from the daemon"
zr_need_root "mounts a tmpfs"
IO=$(zr_helper zr_io)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$M"
head -c $((40 << 20)) /dev/urandom >"$ZR_TMP/src40"
zr_mount_tmpfs "$B" 16m

say "phase 1: 40 MiB into RAM over a 16 MiB backing tmpfs"
zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT
out=$("$IO" copy "$ZR_TMP/src40" "$M/big" 2>&1) && rc=0 || rc=$?
echo "$out" | sed 's/^/     /'
echo "$out" | grep -qx "written $((40 << 20))" ||
	fail "writes into a budget with room must succeed, got: $out"
echo "$out" | grep -Eq "^(fsync|close) error: No space left on device" ||
	fail "fsync/close must report ENOSPC when writeback fails, got: $out"
errs=$(zr_stat writeback_errors)
say "writeback_errors $errs, blocks_dirty $(zr_stat blocks_dirty), orig_data_size $(zr_stat orig_data_size), bytes_written_backing $(zr_stat bytes_written_backing)"
mountpoint -q "$M" || fail "the mount died"
zr_drop_kcache
[ "$(stat -c %s "$M/big")" = $((40 << 20)) ] ||
	fail "big is $(stat -c %s "$M/big") bytes after every write of $((40 << 20)) succeeded"
cmp "$ZR_TMP/src40" "$M/big" || fail "data lost while the backing directory is full"
[ "$errs" -gt 0 ] || fail "writeback_errors is $errs after a failed writeback"

say "enlarging the tmpfs to 64 MiB"
mount -o remount,size=64m "$B" || fail "cannot enlarge the tmpfs"
zr_ctl writeback all
dirty=$(zr_stat blocks_dirty)
[ "$dirty" = 0 ] || fail "blocks_dirty is $dirty after 'writeback all' with space"
out=$("$IO" fsync "$M/big" 2>&1) || say "note: fsync after recovery reports: $out"
zr_umount
cmp "$ZR_TMP/src40" "$B/big" || fail "backing file incomplete after recovery and unmount"
say "ok: all 40 MiB in the backing directory"
umount "$B" || fail "cannot unmount the tmpfs"

say "phase 2: 64 MiB, 16 MiB budget, 8 MiB backing tmpfs"
head -c $((64 << 20)) /dev/urandom >"$ZR_TMP/src64"
zr_mount_tmpfs "$B" 8m
zr_mount "size=16M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT
out=$(timeout 90 "$IO" copy "$ZR_TMP/src64" "$M/huge" 2>&1) && rc=0 || rc=$?
echo "$out" | sed 's/^/     /'
[ "$rc" != 124 ] || fail "the writer hung with a full budget and a full backing directory"
[ "$rc" != 0 ] || fail "64 MiB cannot fit in 16 MiB of RAM and 8 MiB of disk, yet every call succeeded"
echo "$out" | grep -Eq "^(write|fsync|close) error: No space left on device" ||
	fail "expected ENOSPC from write, fsync or close, got: $out"
n=$(echo "$out" | awk '$1 == "written" { print $2 }')
synced=no
echo "$out" | grep -qx "fsync ok" && synced=yes
say "enospc $(zr_stat enospc), writeback_errors $(zr_stat writeback_errors)"
stat "$M/huge" >/dev/null || fail "the mount does not answer after ENOSPC"
mount -o remount,size=128m "$B" || fail "cannot enlarge the tmpfs"
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "blocks still dirty after 'writeback all' with space"
zr_umount
if [ "$synced" = yes ]; then
	cmp -n "$n" "$ZR_TMP/src64" "$B/huge" ||
		fail "the $n bytes written before ENOSPC (fsync ok) are not intact"
	say "ok: the $n bytes written before ENOSPC are intact"
else
	say "fsync reported the error: no byte was promised"
fi
umount "$B" || fail "cannot unmount the tmpfs"

say "phase 3: forty 1 MiB files without fsync, 4 MiB budget, 8 MiB backing tmpfs"
zr_mount_tmpfs "$B" 8m
zr_mount "size=4M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
mkdir -p "$ZR_TMP/src"
accepted=() refused=0
for i in $(seq 40); do
	head -c $((1 << 20)) /dev/urandom >"$ZR_TMP/src/f$i"
	out=$(timeout 60 "$IO" write "$ZR_TMP/src/f$i" "$M/f$i" 2>&1) && rc=0 || rc=$?
	[ "$rc" != 124 ] || fail "the writer of f$i hung"
	if [ "$rc" = 0 ]; then
		accepted+=("f$i")
	else
		refused=$((refused + 1))
	fi
done
say "${#accepted[@]} files accepted, $refused refused; enospc $(zr_stat enospc), writeback_errors $(zr_stat writeback_errors)"
[ "$refused" -gt 0 ] || fail "40 MiB of random data fit in 4 MiB of RAM and 8 MiB of disk without an error"
[ "${#accepted[@]}" -gt 0 ] || fail "no file was accepted: the test shows nothing"
zr_drop_kcache
for f in "${accepted[@]}"; do
	# (the bytes are what counts here)
	cmp "$ZR_TMP/src/$f" <(cat "$M/$f" 2>/dev/null) ||
		fail "$f: write() and close() succeeded, but it reads back wrong"
done
mount -o remount,size=128m "$B" || fail "cannot enlarge the tmpfs"
zr_ctl writeback all
zr_umount
for f in "${accepted[@]}"; do
	cmp "$ZR_TMP/src/$f" "$B/$f" || fail "$f: write() and close() succeeded, but it is not whole on disk"
done
say "ok: the ${#accepted[@]} accepted files are whole on disk"
umount "$B" || fail "cannot unmount the tmpfs"

say "phase 4: a stream's write that the backing directory takes only in part"
zr_mount_tmpfs "$B" 8m
mkdir "$B/sub"
zr_mount_tmpfs "$B/sub" 1m
head -c $((1 << 20)) /dev/zero >"$B/sub/filler" 2>/dev/null || true
zr_mount "size=4M,dirty_expire=1h,seq_cutoff=1m" "$B" "$M"
M=$ZR_MNT
# g: a stream (it goes to the backing file as it arrives), then cut to
# 16 KiB with no block of it in the tier; s: the source of the write
head -c $((2 << 20)) /dev/urandom >"$ZR_TMP/g2"
dd if="$ZR_TMP/g2" of="$M/g" bs=1M conv=fdatasync status=none || fail "cannot write g"
head -c $((64 << 10)) /dev/urandom >"$M/s"
zr_ctl writeback all
zr_ctl drop_clean
truncate -s 16k "$M/g" || fail "cannot truncate g"
[ "$(stat -c %s "$B/g")" = 16384 ] || fail "the backing file of g is $(stat -c %s "$B/g") bytes, not 16384"
# the tier fills with dirty data that cannot go (sub is full)
timeout 60 dd if=/dev/urandom of="$M/sub/d" bs=64k count=128 status=none 2>/dev/null || true
say "blocks_dirty $(zr_stat blocks_dirty), enospc $(zr_stat enospc)"
# the backing tmpfs keeps two pages free
dd if=/dev/zero of="$B/filler" bs=4k status=none 2>/dev/null || true
truncate -s $(($(stat -c %s "$B/filler") - 8192)) "$B/filler"
out=$(timeout 60 python3 -c '
import os, sys
s = os.open(sys.argv[1], os.O_RDONLY)
g = os.open(sys.argv[2], os.O_WRONLY)
try:
    n = os.copy_file_range(s, g, 48 << 10, 0, 16 << 10)
    print("copied", n)
except OSError as e:
    print("error", e.strerror)
' "$M/s" "$M/g" 2>&1) || fail "the write into g hung or crashed: $out"
say "copy_file_range of 48 KiB at 16 KiB: $out"
case $out in
"error No space left on device")
	bsize=$(stat -c %s "$B/g")
	[ "$bsize" = 16384 ] ||
		fail "the failed write left the backing file of g at $bsize bytes, past its 16384"
	;;
copied*) say "note: the write went through (space was found): the case is not shown" ;;
*) fail "unexpected result: $out" ;;
esac
truncate -s 64k "$M/g" || fail "cannot truncate g up"
zr_drop_kcache
nz=$(tail -c +16385 "$M/g" | tr -d '\0' | wc -c)
[ "$nz" = 0 ] || fail "g grown to 64 KiB shows $nz non-zero bytes past its old end"
cmp -n 16384 "$ZR_TMP/g2" "$M/g" || fail "the first 16 KiB of g changed"
# room for sub/d, or the unmount's writeback would wait for it for ever
mount -o remount,size=64m "$B" || fail "cannot enlarge the tmpfs"
mount -o remount,size=64m "$B/sub" || fail "cannot enlarge the sub tmpfs"
zr_ctl writeback all
zr_umount
[ "$(stat -c %s "$B/g")" = 65536 ] || fail "the backing file of g is $(stat -c %s "$B/g") bytes after unmount, not 65536"
nz=$(tail -c +16385 "$B/g" | tr -d '\0' | wc -c)
[ "$nz" = 0 ] || fail "the backing file of g has $nz non-zero bytes past 16 KiB after unmount"
umount "$B/sub" || fail "cannot unmount the sub tmpfs"
umount "$B" || fail "cannot unmount the tmpfs"

say "phase 5: a reader's SEEK_DATA and close while the writeback fails, then the writer's close"
zr_mount_tmpfs "$B" 4m
zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT
out=$(python3 - "$M/h" "$M/.zramfs/control" "$B" <<'PY'
import ctypes, os, sys
path, ctl, backing = sys.argv[1], sys.argv[2], sys.argv[3]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, os.urandom(8 << 20))
writer = os.open(path, os.O_WRONLY)
os.close(fd)	# the kernel sends its pages; nothing was written back yet
try:
    with open(ctl, "w") as c:
        c.write("writeback all\n")
except OSError as e:
    print("writeback all:", e.strerror)
reader = os.open(path, os.O_RDONLY)
try:
    os.lseek(reader, 0, os.SEEK_DATA)
    print("lseek ok")
except OSError as e:
    print("lseek error:", e.strerror)
# room for the writeback: remounted by a system call, not mount(8), whose
# fork and exec would close copies of the writer's fd (a FLUSH each)
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                       ctypes.c_ulong, ctypes.c_void_p]
MS_REMOUNT = 32
if libc.mount(b"tmpfs", backing.encode(), b"tmpfs", MS_REMOUNT, b"size=64m") != 0:
    print("remount error:", os.strerror(ctypes.get_errno()))
try:
    os.fsync(reader)
    print("reader fsync ok")
except OSError as e:
    print("reader fsync error:", e.strerror)
try:
    os.close(reader)
    print("reader close ok")
except OSError as e:
    print("reader close error:", e.strerror)
try:
    os.close(writer)
    print("close ok")
except OSError as e:
    print("close error:", e.strerror)
PY
)
echo "$out" | sed 's/^/     /'
[ "$(zr_stat writeback_errors)" -gt 0 ] || fail "the writeback did not fail: the case is not tested"
echo "$out" | grep -qx "close error: No space left on device" ||
	fail "the writer's close did not report the failed writeback after a reader's lseek, fsync and close"
echo "$out" | grep -qx "reader fsync ok" ||
	fail "the reader's fsync, with room for the writeback, did not succeed"
zr_ctl writeback all
zr_umount
[ "$(stat -c %s "$B/h")" = $((8 << 20)) ] || fail "h is $(stat -c %s "$B/h") bytes on disk, not 8 MiB"
umount "$B" || fail "cannot unmount the tmpfs"

say "phase 6: statfs counts the dirty data in RAM as taken"
zr_mount_tmpfs "$B" 64m
zr_mount "size=64M,dirty_expire=1h,seq_cutoff=0" "$B" "$M"
M=$ZR_MNT
# avail PATH: bytes free to users, as df shows them
avail() { stat -f -c '%a %S' "$1" | awk '{ print $1 * $2 }'; }
head -c $((32 << 20)) /dev/urandom >"$M/d"
sync -f "$M"
[ "$(zr_stat blocks_dirty)" -gt 0 ] || fail "no dirty blocks: the case is not tested"
a_m=$(avail "$M") a_b=$(avail "$B")
say "free: $a_m bytes through the mount, $a_b in the backing tmpfs"
[ "$a_m" -le $((a_b - (32 << 20))) ] ||
	fail "statfs of the mount shows $a_m bytes free, but 32 MiB of the backing tmpfs's $a_b are spoken for"
zr_ctl writeback all
[ "$(avail "$M")" = "$(avail "$B")" ] ||
	fail "with nothing dirty, statfs of the mount differs from the backing tmpfs's"
zr_umount
umount "$B" || fail "cannot unmount the tmpfs"
say "ok"
