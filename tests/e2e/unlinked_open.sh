#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# unlinked_open: files whose last name goes while they are open must not
# hold a daemon fd each (the hard open-file limit is 20,000: two processes
# with 10,500 such temporary files each used to take the daemon to its
# limit). Such a file gets a name in the orphan directory of the backing
# root (.zramfs/unlinked, hidden under the mount) and is reached by it.
#  1. 3000 files written, unlinked and held open at max_fds=64: the daemon
#     holds few fds; each reads back whole with st_nlink 0; a link back
#     through /proc fails as on a local filesystem; the last close removes
#     the orphan, and nothing is written back for it.
#  2. a rename over an open file: the old file stays readable through its
#     descriptor, the new one is at the name.
#  3. kill -9 with an orphan open: the next mount removes the leftover.
#  4. a clean unmount leaves no .zramfs in the backing directory.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "counts the daemon's fds and orphans"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ORPH=$B/.zramfs/unlinked
zr_mount "max_fds=64,dirty_expire=1h" "$B" "$M"

say "3000 open files unlinked at max_fds=64"
bw0=$(zr_stat bytes_written_backing)
python3 - "$ZR_MNT" "$ZR_PID" "$ORPH" <<'PY' || fail "see above"
import errno, os, sys
m, pid, orph = sys.argv[1], sys.argv[2], sys.argv[3]
n = 3000
def stat(name):
    for l in open(m + "/.zramfs/stats"):
        k, v = l.split()
        if k == name:
            return int(v)
fds = []
for i in range(n):
    p = "%s/t%d" % (m, i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (b"%08d" % i) * 1000)
    os.unlink(p)
    fds.append(fd)
dfds = len(os.listdir("/proc/%s/fd" % pid))
print("  -- daemon fds %d, orphans %d, in %s: %d" %
      (dfds, stat("orphans"), orph, len(os.listdir(orph))))
assert dfds <= 64 + 40, "the daemon holds %d fds for %d unlinked open files" % (dfds, n)
assert stat("orphans") == n, "orphans %d, expected %d" % (stat("orphans"), n)
assert len(os.listdir(orph)) == n, "%d names in %s" % (len(os.listdir(orph)), orph)
assert not [e for e in os.listdir(m) if e.startswith("t")], "a name is left"
assert ".zramfs" not in os.listdir(m) or os.path.isfile(m + "/.zramfs/stats"), \
    "the backing .zramfs shows through the mount"
for i, fd in enumerate(fds):
    st = os.fstat(fd)
    assert st.st_nlink == 0, "file %d: st_nlink %d" % (i, st.st_nlink)
    assert st.st_size == 8000, "file %d: size %d" % (i, st.st_size)
    os.write(fd, b"tail")
    os.lseek(fd, 0, os.SEEK_SET)
    got = os.read(fd, 9000)
    assert got == (b"%08d" % i) * 1000 + b"tail", "file %d reads back wrong" % i
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, AT_SYMLINK_FOLLOW = -100, 0x400
r = libc.linkat(AT_FDCWD, b"/proc/self/fd/%d" % fds[0], AT_FDCWD,
                (m + "/back").encode(), AT_SYMLINK_FOLLOW)
assert r < 0, "a link to an unlinked file was made"
assert ctypes.get_errno() == errno.ENOENT, "link back: %s" % os.strerror(ctypes.get_errno())
for fd in fds:
    os.close(fd)
assert stat("orphans") == 0, "orphans %d after the last close" % stat("orphans")
assert os.listdir(orph) == [], "left in %s: %s" % (orph, os.listdir(orph)[:5])
PY
bw1=$(zr_stat bytes_written_backing)
[ $((bw1 - bw0)) -lt $((1 << 20)) ] ||
	fail "$((bw1 - bw0)) bytes were written back for files that were deleted"

say "rename over an open file"
echo old >"$M/a"
echo new >"$M/b"
exec 7<"$M/a"
mv "$M/b" "$M/a"
[ "$(cat "$M/a")" = new ] || fail "the name does not reach the new file"
[ "$(cat <&7)" = old ] || fail "the replaced file is not readable through its fd"
[ "$(zr_stat orphans)" = 1 ] || fail "orphans $(zr_stat orphans), expected 1"
exec 7<&-
[ "$(zr_stat orphans)" = 0 ] || fail "orphans $(zr_stat orphans) after the close"
zr_ctl writeback all	# a is to outlive the kill -9 below

say "kill -9 with an orphan open; the next mount removes it"
echo gone >"$M/c"
exec 7<"$M/c"
rm "$M/c"
[ "$(ls "$ORPH" | wc -l)" = 1 ] || fail "no orphan in $ORPH: $(ls -a "$B/.zramfs" 2>&1)"
zr_kill9
exec 7<&-
zr_mount "" "$B" "$M"
[ "$(ls "$ORPH" 2>/dev/null | wc -l)" = 0 ] || fail "the mount left $(ls "$ORPH")"
[ "$(ls "$M")" = a ] || fail "the mount shows: $(ls "$M")"
zr_umount
[ ! -e "$B/.zramfs" ] || fail "unmount left $(ls -aR "$B/.zramfs")"
[ "$(cat "$B/a")" = new ] || fail "the renamed file is not in the backing directory"
say "ok"
