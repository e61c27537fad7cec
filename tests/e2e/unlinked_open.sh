#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# unlinked_open: files whose last name goes while they are open must not
# hold a daemon fd each (the hard open-file limit is 20,000: two processes
# with 10,500 such temporary files each used to take the daemon to its
# limit). Such a file gets a name in the orphan directory of the backing
# root (.zramfs/unlinked, hidden under the mount) and is reached by it.
#  1. 3000 files written, unlinked and held open at max_fds=64: the daemon
#     holds few fds; each reads back whole with st_nlink 0 (100 of them
#     fsynced, their clean blocks dropped: read through the orphan's name);
#     a link back through /proc fails as on a local filesystem; past
#     dirty_expire nothing is written back for them; the last close removes
#     the orphan.
#  2. a rename over an open file: the old file stays readable through its
#     descriptor, the new one is at the name.
#  3. kill -9 with an orphan open: the next mount removes the leftover.
#  4. a clean unmount leaves no .zramfs in the backing directory.
#  5. eight processes replace shared names by rename while holding the old
#     files open, at max_fds=16 (a helper's reproducer): an OPEN that came
#     while another handle's last RELEASE removed the orphan got a file
#     with no name and no data (fstat ESTALE, close EIO: 50-90 per 8000
#     rounds); every fstat, write and close must succeed.
#  6. two processes replace a name by rename over and over while four open,
#     read and close it (the write-a-temp-then-rename pattern): every open
#     must find a whole version, as on ext4 (an OPEN that came after the
#     replaced file was dropped got ESTALE: 147 in 500,000 opens).
#  7. no orphan's name can be made (the backing root's .zramfs is a file;
#     a full backing filesystem does the same): the file unlinked while
#     open is held by the daemon's fd, and its dirty data, written back
#     through that fd, reads back whole (it used to be taken for a file
#     removed behind the daemon's back, and dropped: zeros read back).
#     Such files keep an fd each, at most max_fds/4 (16 here) of them:
#     unlinking one more open file fails with EBUSY and loses nothing.
#  8. 200 files with a second link made before the mount, opened through
#     one name and unlinked, at max_fds=64: each gets an orphan's name
#     instead of a pinned fd (the daemon used to hold 200 more fds), what
#     is written through the open fds lands under the other names, and
#     the last close removes the orphans.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "counts the daemon's fds and orphans"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
ORPH=$B/.zramfs/unlinked
# dirty_expire=1s: what is written to a deleted file stays out of the disk
# all the same, while the daemon keeps it
zr_mount "max_fds=64,dirty_expire=1s" "$B" "$M"

say "3000 open files unlinked at max_fds=64"
python3 - "$ZR_MNT" "$ZR_PID" "$ORPH" <<'PY' || fail "see above"
import errno, os, sys, time
m, pid, orph = sys.argv[1], sys.argv[2], sys.argv[3]
n = 3000
def stat(name):
    for l in open(m + "/.zramfs/stats"):
        k, v = l.split()
        if k == name:
            return int(v)
def settle(name, want, secs=10):
    """close() does not wait for the daemon's RELEASE: poll"""
    import time
    for _ in range(secs * 20):
        if stat(name) == want:
            return True
        time.sleep(0.05)
    return False
fds = []
for i in range(n):
    p = "%s/t%d" % (m, i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (b"%08d" % i) * 1000)
    os.unlink(p)
    fds.append(fd)
# 100 of them written back through their orphan's name (then clean in the
# tier), the rest handed to the daemon as dirty blocks
for fd in fds[:100]:
    os.fsync(fd)
os.sync()
bw_mid = stat("bytes_written_backing")
cfd = os.open(m + "/.zramfs/control", os.O_WRONLY)
os.write(cfd, b"drop_clean\n")
os.close(cfd)
try:
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1\n")
except OSError:
    pass	# reads may then come from the kernel's cache
time.sleep(2.5)	# past dirty_expire: the orphans must not be written back by age
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
bw = stat("bytes_written_backing") - bw_mid
assert bw < 65536, "%d bytes written back by age for files deleted while open" % bw
for fd in fds:
    os.close(fd)
assert settle("orphans", 0), "orphans %d after the last close" % stat("orphans")
assert os.listdir(orph) == [], "left in %s: %s" % (orph, os.listdir(orph)[:5])
PY
say "rename over an open file"
echo old >"$M/a"
echo new >"$M/b"
exec 7<"$M/a"
mv "$M/b" "$M/a"
[ "$(cat "$M/a")" = new ] || fail "the name does not reach the new file"
[ "$(cat <&7)" = old ] || fail "the replaced file is not readable through its fd"
[ "$(zr_stat orphans)" = 1 ] || fail "orphans $(zr_stat orphans), expected 1"
exec 7<&-
for i in $(seq 100); do [ "$(zr_stat orphans)" = 0 ] && break; sleep 0.1; done
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

say "5: eight processes rename over files they hold open, at max_fds=16"
zr_mount "max_fds=16" "$B" "$M"
python3 - "$ZR_MNT" <<'PY' || fail "see above"
import os, random, sys
from multiprocessing import Pool
m = sys.argv[1]
for d in ("d1", "d2"):
    os.makedirs("%s/%s" % (m, d), exist_ok=True)
def worker(w):
    r = random.Random(w)
    errs, held = [], []
    for it in range(1000):
        tgt = "%s/d%d/shared%d" % (m, r.randrange(1, 3), r.randrange(4))
        tmp = "%s/d%d/tmp.%d.%d" % (m, r.randrange(1, 3), w, it)
        with open(tmp, "wb") as f:
            f.write(b"x" * r.randrange(1, 30000))
        try:
            ofd = os.open(tgt, os.O_RDWR)
        except FileNotFoundError:
            ofd = None
        except OSError as e:
            # an open racing the rename of a file nobody holds may find it
            # gone from the daemon (ESTALE; ext4 gives the old file)
            if e.errno != 116:
                errs.append("open: %s" % e.strerror)
            ofd = None
        os.rename(tmp, tgt)
        if ofd is not None:
            try:
                os.fstat(ofd)
                os.pwrite(ofd, b"Z", 0)
                held.append(ofd)
            except OSError as e:
                errs.append("fstat/pwrite: %s" % e.strerror)
                os.close(ofd)
        if len(held) > 20:
            try:
                os.close(held.pop(0))
            except OSError as e:
                errs.append("close: %s" % e.strerror)
    for h in held:
        try:
            os.close(h)
        except OSError as e:
            errs.append("close: %s" % e.strerror)
    return errs
errs = sum(Pool(8).map(worker, range(8)), [])
if errs:
    sys.exit("%d errors: %s" % (len(errs), {e: errs.count(e) for e in set(errs)}))
PY
for i in $(seq 100); do [ "$(zr_stat orphans)" = 0 ] && break; sleep 0.1; done
[ "$(zr_stat orphans)" = 0 ] || fail "orphans $(zr_stat orphans) after every file was closed"
[ "$(stat -c %h "$M")" = 4 ] || fail "the mount root has $(stat -c %h "$M") links with d1 and d2 listed (the backing .zramfs counted?)"

say "6: a name replaced by rename (two writers) while four processes open and read it"
python3 - "$ZR_MNT" <<'PY' || fail "see above"
import os, sys, time
from multiprocessing import Process, Queue
m = sys.argv[1]
name, secs = m + "/replaced", 6
def version(i):
    return (b"%08d" % i) * 625	# 5000 bytes
with open(name, "wb") as f:
    f.write(version(0))
def writer(w):
    i = 1
    end = time.time() + secs
    while time.time() < end:
        tmp = "%s/.tmp%d.%d" % (m, w, i)
        with open(tmp, "wb") as f:
            f.write(version(i))
        os.rename(tmp, name)
        i += 1
def reader(q):
    opens, errs = 0, {}
    end = time.time() + secs
    while time.time() < end:
        try:
            fd = os.open(name, os.O_RDONLY)
        except OSError as e:
            errs["open: " + e.strerror] = errs.get("open: " + e.strerror, 0) + 1
            continue
        try:
            data = os.read(fd, 10000)
            if len(data) != 5000 or data != data[:8] * 625:
                errs["torn or wrong content"] = errs.get("torn or wrong content", 0) + 1
        except OSError as e:
            errs["read: " + e.strerror] = errs.get("read: " + e.strerror, 0) + 1
        os.close(fd)
        opens += 1
    q.put((opens, errs))
q = Queue()
ps = [Process(target=writer, args=(w,)) for w in range(2)] + \
     [Process(target=reader, args=(q,)) for _ in range(4)]
for p in ps:
    p.start()
res = [q.get() for _ in range(4)]
for p in ps:
    p.join()
opens = sum(r[0] for r in res)
errs = {}
for r in res:
    for k, v in r[1].items():
        errs[k] = errs.get(k, 0) + v
print("  -- %d opens, errors: %s" % (opens, errs or "none"))
sys.exit(1 if errs else 0)
PY
for i in $(seq 100); do [ "$(zr_stat orphans)" = 0 ] && break; sleep 0.1; done
[ "$(zr_stat orphans)" = 0 ] || fail "orphans $(zr_stat orphans) once the replaced files were forgotten"
zr_umount

say "no orphan directory: an unlinked open file keeps its data"
B2=$ZR_TMP/backing2 M2=$ZR_TMP/mnt2
mkdir -p "$B2" "$M2"
echo "not a directory" >"$B2/.zramfs"
head -c 1048576 /dev/urandom >"$ZR_TMP/data"
zr_mount "dirty_expire=1h" "$B2" "$M2"
cp "$ZR_TMP/data" "$ZR_MNT/f"
exec 3<"$ZR_MNT/f"
rm "$ZR_MNT/f"
zr_ctl writeback all
zr_ctl drop_clean
zr_drop_kcache
[ "$(zr_stat removed_dropped)" = 0 ] ||
	fail "removed_dropped $(zr_stat removed_dropped): the unlinked open file's data was dropped"
cmp - "$ZR_TMP/data" <&3 || fail "the unlinked open file does not read back what was written"
exec 3<&-
zr_umount

say "no orphan directory: 40 open files unlinked at max_fds=64, 16 keep an fd"
zr_mount "max_fds=64,dirty_expire=1h" "$B2" "$M2"
python3 - "$ZR_MNT" <<'PY' || fail "see above"
import errno, os, sys
m = sys.argv[1]
fds, busy = [], []
for i in range(40):
    p = "%s/p%d" % (m, i)
    fd = os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, (b"%08d" % i) * 1000)
    fds.append(fd)
    try:
        os.unlink(p)
    except OSError as e:
        assert e.errno == errno.EBUSY, "unlink %d: %s" % (i, e.strerror)
        busy.append(i)
print("  -- %d unlinks refused (EBUSY)" % len(busy))
assert busy == list(range(16, 40)), "refused: %s" % busy
for i in busy:
    assert os.path.exists("%s/p%d" % (m, i)), "p%d is gone after EBUSY" % i
for i, fd in enumerate(fds):
    assert os.pread(fd, 9000, 0) == (b"%08d" % i) * 1000, "file %d reads back wrong" % i
    os.close(fd)
for i in busy:
    os.unlink("%s/p%d" % (m, i))	# not open any more
assert not [e for e in os.listdir(m) if e.startswith("p")], "a name is left"
PY
zr_umount

say "8: 200 open files with another link unlinked at max_fds=64"
B3=$ZR_TMP/backing3 M3=$ZR_TMP/mnt3
mkdir -p "$B3/l" "$B3/k" "$M3"
for i in $(seq 0 199); do
	printf 'old %d\n' "$i" >"$B3/l/f$i"
	ln "$B3/l/f$i" "$B3/k/f$i"
done
zr_mount "max_fds=64,dirty_expire=1h" "$B3" "$M3"
python3 - "$ZR_MNT" "$ZR_PID" "$B3/.zramfs/unlinked" <<'PY' || fail "see above"
import os, sys, time
m, pid, orph = sys.argv[1], sys.argv[2], sys.argv[3]
def stat(name):
    for l in open(m + "/.zramfs/stats"):
        k, v = l.split()
        if k == name:
            return int(v)
fds0 = len(os.listdir("/proc/%s/fd" % pid))
fds = []
for i in range(200):
    p = "%s/l/f%d" % (m, i)
    fd = os.open(p, os.O_RDWR)
    os.unlink(p)		# the only name of it the daemon knows
    os.pwrite(fd, (b"%07d\n" % i) * 2000, 0)
    fds.append(fd)
grown = len(os.listdir("/proc/%s/fd" % pid)) - fds0
print("  -- daemon fds grew by %d, orphans %d" % (grown, stat("orphans")))
assert grown <= 64 + 8, "the daemon holds %d more fds for 200 open files" % grown
assert stat("orphans") == 200, "orphans %d, expected 200" % stat("orphans")
for i, fd in enumerate(fds):
    st = os.fstat(fd)
    assert st.st_nlink == 1, "file %d: st_nlink %d, expected 1" % (i, st.st_nlink)
    assert os.pread(fd, 20000, 0) == (b"%07d\n" % i) * 2000, "file %d reads back wrong" % i
    os.close(fd)
for _ in range(200):
    if stat("orphans") == 0:
        break
    time.sleep(0.05)
assert stat("orphans") == 0, "orphans %d after the last close" % stat("orphans")
assert os.listdir(orph) == [], "left in %s: %s" % (orph, os.listdir(orph)[:5])
PY
zr_ctl writeback all
zr_drop_kcache
for i in 0 57 199; do
	for _ in $(seq 2000); do printf '%07d\n' "$i"; done >"$ZR_TMP/expect"
	cmp "$ZR_TMP/expect" "$ZR_MNT/k/f$i" || fail "k/f$i does not hold what was written through l/f$i"
done
[ -z "$(ls "$ZR_MNT/l")" ] || fail "l/ still lists $(ls "$ZR_MNT/l" | head -3)"
zr_umount
for i in $(seq 0 199); do
	[ "$(stat -c %s "$B3/k/f$i")" = 16000 ] || fail "backing k/f$i has $(stat -c %s "$B3/k/f$i") bytes"
	[ "$(stat -c %h "$B3/k/f$i")" = 1 ] || fail "backing k/f$i has $(stat -c %h "$B3/k/f$i") links"
done
[ ! -e "$B3/.zramfs" ] || fail "unmount left $(ls -aR "$B3/.zramfs")"
say "ok"
