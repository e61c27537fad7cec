#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# number_reuse: ext4 gives a new file the inode number of a removed one at
# once. While an unlink is in the backing filesystem, a file made in
# another directory may get the removed file's number; the daemon, which
# knows files by (st_dev, st_ino) when it has no file handles (an
# unprivileged daemon, or CAP_DAC_READ_SEARCH dropped as here), must not
# give the new file the old inode: it showed the removed file's size and
# dirty data (another user's, maybe), and wrote that data back into itself
# at unmount.  zr_fault.so holds the daemon for 1.5 s after the backing
# unlink, with the number free; new files are made meanwhile, and the test
# asserts that one of them got the number (else it tests nothing).  (A
# file replaced by a rename and a removed directory are kept by the daemon
# while the kernel holds them, by an orphan name or a pinned fd, so their
# numbers are not freed in that window.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "races a removal inside the daemon with a creation"
zr_need_root "drops CAP_DAC_READ_SEARCH from the daemon"
zr_need_tool capsh python3
FAULT=$(zr_helper zr_fault.so)

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/d1" "$B/o" "$M"
# d2: of 16 directories, the one where a new file's number is nearest to
# one made in d1 (ext4 puts a file in the first block group with free
# inodes of its directory's flex group, and takes the lowest free number)
python3 - "$B" <<'PY' || fail "cannot choose d2"
import os, sys
b = sys.argv[1]
def probe(d):
    p = d + "/probe"
    open(p, "w").close()
    n = os.stat(p).st_ino
    os.unlink(p)
    return n
near = []
for i in range(16):
    d = "%s/c%d" % (b, i)
    os.mkdir(d)
    near.append((abs(probe(d) - probe(b + "/d1")), d))
os.rename(min(near)[1], b + "/d2")
for _, d in near:
    if os.path.isdir(d):
        os.rmdir(d)
PY
for i in $(seq 40); do echo "other $i" >"$B/o/f$i"; done
printf '#!/bin/sh\nexec capsh --drop=cap_dac_read_search -- -c '\''exec "$0" "$@"'\'' %s "$@"\n' \
	"$ZRAMFS" >"$ZR_TMP/nohandles_zramfs"
chmod 755 "$ZR_TMP/nohandles_zramfs"

ZRAMFS=$ZR_TMP/nohandles_zramfs ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_NAME=victim \
	ZR_FAULT_REMOVE_DELAY_MS=1500 LD_PRELOAD=$FAULT ASAN_OPTIONS=verify_asan_link_order=0 \
	zr_mount "max_fds=16,dirty_expire=1h" "$B" "$M"
grep -q "not opened by handle" "$ZR_LOG" ||
	fail "the daemon uses file handles: the case is not tested ($(cat "$ZR_LOG"))"

say "unlink of a file with dirty data, files made meanwhile"
python3 - "$M" "$B" "$ZR_TMP/armed" <<'PY' || fail "a new file is the removed one"
import os, sys, time
m, b, armed = sys.argv[1:4]
secret = b"SECRET of the removed file\n" * 900
v = m + "/d1/victim"
made = 0

def race():
    """Unlink the victim while making files in d2: the one that got its
    number, or None."""
    global made
    with open(v, "wb") as f:       # dirty in the tier (dirty_expire=1h)
        f.write(secret)
    for i in range(1, 41):         # push the victim's fd out of the cache
        open("%s/o/f%d" % (m, i)).read()
    old = os.stat(b + "/d1/victim").st_ino
    open(armed, "w").close()
    pid = os.fork()
    if pid == 0:
        try:
            os.unlink(v)
            os._exit(0)
        except OSError as e:
            print("unlink failed: %s" % e)
            os._exit(1)
    time.sleep(0.5)                # the number is free now, the daemon held
    got = None
    for i in range(24):
        made += 1
        name = "d2/new%d" % made
        os.close(os.open(m + "/" + name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644))
        if os.stat(b + "/" + name).st_ino == old:
            got = m + "/" + name
            print("%s got number %d" % (got, old))
            break
    _, st = os.waitpid(pid, 0)
    if st != 0:
        sys.exit(1)
    return got

# ext4 may give the number to another file first (this test's own, any
# process's): up to 5 rounds
for r in range(5):
    p = race()
    if p:
        break
else:
    print("no new file got the removed one's number in 5 rounds: not tested")
    sys.exit(1)
size = os.stat(p).st_size
data = open(p, "rb").read()
if size or data:
    print("the new file has size %d and %d bytes%s" %
          (size, len(data), " of the removed file's data" if b"SECRET" in data else ""))
    sys.exit(1)
PY

# The daemon takes the file out of its table before the backing unlink,
# and must put it back when that fails: left out, the file's inode and its
# dirty blocks were freed once the kernel forgot it.
say "unlink refused by the backing filesystem (chattr +i): the file and its dirty data stay"
head -c 50000 /dev/urandom >"$ZR_TMP/keep.src"
cp "$ZR_TMP/keep.src" "$M/d1/keep"
if chattr +i "$B/d1/keep" 2>/dev/null; then
	ZR_ATEXIT+=("chattr -i '$B/d1/keep'")
	! rm -f "$M/d1/keep" 2>/dev/null || fail "rm of an immutable file succeeded"
	chattr -i "$B/d1/keep"
	zr_drop_kcache
	sleep 1
	cmp -s "$ZR_TMP/keep.src" "$M/d1/keep" ||
		fail "after a failed unlink and the kernel forgetting it, the file lost its data"
	kept=1
else
	say "not tested: the backing filesystem (TMPDIR=${TMPDIR:-/tmp}) has no immutable files"
	kept=0
fi

zr_umount
[ "$kept" = 0 ] || cmp -s "$ZR_TMP/keep.src" "$B/d1/keep" ||
	fail "the file whose unlink failed is not whole on disk after the unmount"
for f in "$B"/d2/new*; do
	if [ -s "$f" ]; then
		fail "$f is $(stat -c %s "$f") bytes on disk after the unmount (the removed file's data written into it)"
	fi
done
say "ok: a new file with a removed one's number is new, and empty on disk"
