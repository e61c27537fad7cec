#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# number_reuse: ext4 gives a new file the inode number of a removed one at
# once. While the backing call that frees a number runs, a file made in
# another directory may get it; the daemon, which knows files by (st_dev,
# st_ino) when it has no file handles (an unprivileged daemon, or
# CAP_DAC_READ_SEARCH dropped as here), must not give the new file the old
# inode: it showed the removed file's size and dirty data (another user's,
# maybe), and wrote that data back into itself at unmount, or, at the
# removal of an orphan's name, had its own data dropped.  zr_fault.so
# holds the daemon for 1.5 s after the backing unlink, with the number
# free; new files are made meanwhile, and the test asserts that one of
# them got the number (else it tests nothing).  Two removals: the unlink
# of a closed file, and the last close of a file unlinked while open (its
# name in the orphan directory goes then).  A third part makes the
# backing unlink fail (an immutable file): the file must stay whole.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "races a removal inside the daemon with a creation"
zr_need_root "drops CAP_DAC_READ_SEARCH from the daemon"
zr_need_tool capsh python3 mkfs.ext4 chattr
FAULT=$(zr_helper zr_fault.so)

# The backing directory is a fresh ext4 image of its own: one block group,
# where a new file gets the lowest free inode number whatever its
# directory, and no other process makes files.  (On a shared filesystem
# ext4 may put the two directories in different groups, or another
# process may take the number first: CI's once gave no reuse in 10 rounds.)
IMG=$ZR_TMP/ext4.img B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
truncate -s 64M "$IMG" && mkfs.ext4 -q -F -b 4096 "$IMG" || fail "mkfs.ext4 failed"
mount -o loop "$IMG" "$B" || zr_skip "cannot mount an ext4 image on a loop device"
mkdir -p "$B/d1" "$B/d2" "$B/o"
for i in $(seq 40); do echo "other $i" >"$B/o/f$i"; done
printf '#!/bin/sh\nexec capsh --drop=cap_dac_read_search -- -c '\''exec "$0" "$@"'\'' %s "$@"\n' \
	"$ZRAMFS" >"$ZR_TMP/nohandles_zramfs"
chmod 755 "$ZR_TMP/nohandles_zramfs"

ZRAMFS=$ZR_TMP/nohandles_zramfs ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_REMOVE_NAME='victim|zr-*' \
	ZR_FAULT_REMOVE_DELAY_MS=1500 zr_mount_fault "max_fds=16,dirty_expire=1h" "$B" "$M"
grep -q "not opened by handle" "$ZR_LOG" ||
	fail "the daemon uses file handles: the case is not tested ($(cat "$ZR_LOG"))"

say "unlink of a closed file, and last close of a file unlinked open; files made meanwhile"
python3 - "$M" "$B" "$ZR_TMP/armed" <<'PY' || fail "a new file is the removed one"
import os, sys, time
m, b, armed = sys.argv[1:4]
secret = b"SECRET of the removed file\n" * 900
made = 0

def push():
    """Push the victim's fd out of the daemon's cache (max_fds=16)."""
    for i in range(1, 41):
        open("%s/o/f%d" % (m, i)).read()

def closed_unlink():
    """The unlink of a closed file with dirty data in the tier
    (dirty_expire=1h): @return its number, the removal to run, and
    whether that waits for the daemon's backing call (the unlink does)."""
    v = m + "/d1/victim"
    with open(v, "wb") as f:
        f.write(secret)
    push()
    return os.stat(b + "/d1/victim").st_ino, lambda: os.unlink(v), True

def orphan_close():
    """The last close of a file unlinked while open: its orphan's name
    goes at the FORGET that follows."""
    v = m + "/d1/victim-open"
    fd = os.open(v, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, secret)
    os.unlink(v)
    push()
    old = os.fstat(fd).st_ino
    names = [n for n in os.listdir(b + "/.zramfs/unlinked") if n.startswith("zr-%d-" % old)]
    if len(names) != 1:
        print("no orphan's name for number %d: %s" % (old, os.listdir(b + "/.zramfs/unlinked")))
        sys.exit(1)
    return old, lambda: os.close(fd), False

def race(setup):
    """Remove while making files in d2: the one that got the removed
    file's number, or None."""
    global made
    old, remove, blocks = setup()
    open(armed, "w").close()
    pid = os.fork() if blocks else None
    if pid == 0:
        try:
            remove()
            os._exit(0)
        except OSError as e:
            print("removal failed: %s" % e)
            os._exit(1)
    if pid is None:
        remove()                   # (a close: the daemon removes the name later)
    time.sleep(0.5)                # the number is free now, the daemon held
    got = None
    for i in range(24):
        made += 1
        name = "d2/new%d" % made
        os.close(os.open(m + "/" + name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        if os.stat(b + "/" + name).st_ino == old:
            got = m + "/" + name
            print("%s: %s got number %d" % (setup.__name__, got, old))
            break
    if pid is not None and os.waitpid(pid, 0)[1] != 0:
        sys.exit(1)
    if os.path.exists(armed):
        print("%s: the removal did not reach the backing filesystem" % setup.__name__)
        sys.exit(1)
    return got

for setup in (closed_unlink, orphan_close):
    # ext4 may give the number to another file first (this test's own,
    # any process's): up to 10 rounds
    for r in range(10):
        p = race(setup)
        if p:
            break
    else:
        print("%s: no new file got the removed one's number in 10 rounds: not tested" % setup.__name__)
        sys.exit(1)
    size = os.stat(p).st_size
    data = open(p, "rb").read()
    if size or data:
        print("%s: the new file has size %d and %d bytes%s" %
              (setup.__name__, size, len(data), " of the removed file's data" if b"SECRET" in data else ""))
        sys.exit(1)
    # the new file's own data, written back at the unmount
    with open(p, "wb") as f:
        f.write(b"new file %s\n" % os.path.basename(p).encode())
    push()
    time.sleep(1)                  # the FORGET of the removed file's inode
    if open(p, "rb").read() != b"new file %s\n" % os.path.basename(p).encode():
        print("%s: the new file does not read back what was written" % setup.__name__)
        sys.exit(1)
    open(b + "/" + "../got-" + setup.__name__, "w").write(p.rsplit("/", 1)[1])
PY

# The daemon takes the file out of its table before the backing unlink,
# and must put it back when that fails: left out, the file's inode and its
# dirty blocks were freed once the kernel forgot it.
say "unlink refused by the backing filesystem (chattr +i): the file and its dirty data stay"
head -c 50000 /dev/urandom >"$ZR_TMP/keep.src"
cp "$ZR_TMP/keep.src" "$M/d1/keep"
if chattr +i "$B/d1/keep" 2>/dev/null; then
	! rm -f "$M/d1/keep" 2>/dev/null || fail "rm of an immutable file succeeded"
	chattr -i "$B/d1/keep"
	zr_drop_kcache
	sleep 1
	cmp -s "$ZR_TMP/keep.src" "$M/d1/keep" ||
		fail "after a failed unlink and the kernel forgetting it, the file lost its data"
	kept=1
else
	say "not tested: chattr +i refused on the ext4 image"
	kept=0
fi

zr_umount
[ "$kept" = 0 ] || cmp -s "$ZR_TMP/keep.src" "$B/d1/keep" ||
	fail "the file whose unlink failed is not whole on disk after the unmount"
for k in closed_unlink orphan_close; do
	n=$(cat "$ZR_TMP/got-$k")
	[ "$(cat "$B/d2/$n")" = "new file $n" ] ||
		fail "$k: $n is not what was written to it on disk after the unmount: $(head -c 60 "$B/d2/$n" | tr -c '[:print:]' .)"
done
for f in "$B"/d2/new*; do
	if grep -q SECRET "$f"; then
		fail "$f holds the removed file's data on disk after the unmount"
	fi
done
say "ok: a new file with a removed one's number is new, and empty on disk"
