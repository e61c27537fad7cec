#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# rename_open: a file is renamed, then its directory is renamed, while a
# process keeps it open and writes.  The daemon re-opens backing files by
# parent and name, so it must track renames: the data written after each
# rename must land in the file under its new name (and nowhere else), also
# when written back while the file is still open.  Last: two files are
# swapped by RENAME_EXCHANGE over and over while one of them, held open, is
# written and its pages sent with sync_file_range(2) (a WRITE from the page
# cache, which the rename's inode locks do not hold back), its fd pushed
# out of the daemon's cache before each write (max_fds=16). zr_fault.so
# holds the daemon 10 ms after each backing rename, before it records the
# new names: a reopen in that window found its name on the other file,
# retried 32 times at once and failed the WRITE with ESTALE, and the
# kernel dropped those pages (helper-48). Every write must reach the file.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/dir1" "$B/other" "$M"
for i in 1 2 3 4; do head -c 700000 /dev/urandom >"$ZR_TMP/chunk$i"; done
cat "$ZR_TMP"/chunk[1234] >"$ZR_TMP/expect"
echo "the victim" >"$B/other/victim"

zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

exec 3>"$M/dir1/file"
cat "$ZR_TMP/chunk1" >&3
say "rename the open file"
mv "$M/dir1/file" "$M/dir1/file2"
cat "$ZR_TMP/chunk2" >&3
say "rename its directory"
mv "$M/dir1" "$M/dir2"
cat "$ZR_TMP/chunk3" >&3
zr_ctl writeback all
say "rename it over an existing file in another directory"
mv "$M/dir2/file2" "$M/other/victim"
cat "$ZR_TMP/chunk4" >&3
exec 3>&-

[ ! -e "$M/dir1" ] || fail "dir1 still exists"
[ ! -e "$M/dir2/file" ] && [ ! -e "$M/dir2/file2" ] || fail "an old name still exists"
cmp "$ZR_TMP/expect" "$M/other/victim" || fail "content under the new name differs"
zr_ctl writeback all
if zr_real; then
	cmp "$ZR_TMP/expect" "$B/other/victim" ||
		fail "backing file differs after 'writeback all' while mounted"
fi
zr_umount

say "checking the backing directory"
cmp "$ZR_TMP/expect" "$B/other/victim" || fail "backing other/victim differs"
leftovers=$(cd "$B" && find . -type f ! -path ./other/victim)
[ -z "$leftovers" ] || fail "stray files in the backing directory: $leftovers"

zr_mount "" "$B" "$M"
cmp "$ZR_TMP/expect" "$ZR_MNT/other/victim" || fail "content differs after remount"
zr_umount

if zr_real; then
	say "RENAME_EXCHANGE of an open file while it is written and reopened"
	FAULT=$(zr_helper zr_fault.so)
	XB=$ZR_TMP/xbacking
	mkdir -p "$XB"
	touch "$ZR_TMP/armed"
	ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=b ZR_FAULT_RENAME_DELAY_MS=10 \
		zr_mount_fault "max_fds=16" "$XB" "$M"
	python3 - "$ZR_MNT" <<'PY' || fail "see above"
import ctypes, os, sys, time
m = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
for n in ("a", "b"):
    with open("%s/%s" % (m, n), "wb") as f:
        f.write(n.encode() * 8192)
for i in range(24):
    open("%s/o%d" % (m, i), "w").write("other")
pid = os.fork()
if pid == 0:
    end, n = time.time() + 3, 0
    while time.time() < end:
        if libc.renameat2(AT_FDCWD, (m + "/a").encode(), AT_FDCWD,
                          (m + "/b").encode(), RENAME_EXCHANGE) != 0:
            os._exit(2)
        n += 1
    print("  -- %d exchanges" % n)
    os._exit(0)
fd = os.open(m + "/a", os.O_RDWR)
sfr = libc.sync_file_range
sfr.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
writes, errs = 0, {}
end = time.time() + 3
while time.time() < end:
    for i in range(24):		# the held file's fd leaves the daemon's cache
        os.close(os.open("%s/o%d" % (m, i), os.O_RDONLY))
    os.pwrite(fd, (b"%08d" % writes) * 512, 0)
    # WAIT_BEFORE | WRITE | WAIT_AFTER: the WRITE, and its error
    if sfr(fd, 0, 4096, 7) != 0:
        e = os.strerror(ctypes.get_errno())
        errs[e] = errs.get(e, 0) + 1
    writes += 1
_, st = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(st) == 0, "an exchange failed"
last = os.pread(fd, 4096, 0) if not errs else b""
os.close(fd)
print("  -- %d writes, errors: %s" % (writes, errs or "none"))
assert not errs, "writes failed"
assert last == (b"%08d" % (writes - 1)) * 512, "the held file does not hold the last write"
PY
	rm -f "$ZR_TMP/armed"
	zr_umount
fi
