#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# dir_handles: open directories do not cost the daemon one fd each.  With
# max_fds=64 (16 directory streams at most): 3000 directory handles held
# open without reading; then 300 directories of 100 entries read through
# 300 handles at once, a few entries from each in turn, so that streams are
# closed and reopened mid-listing (at the offset they had reached): every
# listing must be whole, each name once, and the daemon's fd count stays
# bounded.  Last, a directory removed while open, and one renamed over
# while open: fstat through the handle gives a link count of 0, and its
# listing is empty.  Removed directories held by O_PATH descriptors, or
# open, keep at most max_fds/4 fds between them (open ones still list
# empty, with a link count of 0).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "counts the daemon's file descriptors"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
python3 - "$B" <<'PY'
import os, sys
b = sys.argv[1]
for i in range(300):
    d = "%s/d%d" % (b, i)
    os.mkdir(d)
    for j in range(100):
        open("%s/entry_%d_with_a_longer_name_%d" % (d, j, i), "w").close()
for i in range(3000):
    os.mkdir("%s/h%d" % (b, i))
PY
zr_mount "max_fds=64" "$B" "$M"

python3 - "$ZR_MNT" "$ZR_PID" <<'PY' || fail "see above"
import os, sys
m, pid = sys.argv[1], sys.argv[2]
def daemon_fds():
    return len(os.listdir("/proc/%s/fd" % pid))
base = daemon_fds()
bad = 0
held = [os.open("%s/h%d" % (m, i), os.O_RDONLY | os.O_DIRECTORY) for i in range(3000)]
n = daemon_fds() - base
print("     3000 unread directory handles: %d more daemon fds" % n)
if n > 64 + 16:
    print("FAIL: unread directory handles hold daemon fds")
    bad = 1
for h in held:
    os.close(h)
fds = [os.open("%s/d%d" % (m, i), os.O_RDONLY | os.O_DIRECTORY) for i in range(300)]
its = [os.scandir(fd) for fd in fds]
names = [[] for _ in fds]
most = 0
live = list(range(len(its)))
while live:
    nxt = []
    for k in live:
        got = 0
        for e in its[k]:
            names[k].append(e.name)
            got += 1
            if got == 7:
                break
        if got == 7:
            nxt.append(k)
    most = max(most, daemon_fds() - base)
    live = nxt
for k, fd in enumerate(fds):
    want = sorted("entry_%d_with_a_longer_name_%d" % (j, k) for j in range(100))
    if sorted(names[k]) != want:
        print("FAIL: d%d listed %d names (%d distinct), expected 100" %
              (k, len(names[k]), len(set(names[k]))))
        bad = 1
    os.close(fd)
print("     300 listings read in turns: at most %d more daemon fds" % most)
if most > 64 + 16 + 8:
    print("FAIL: the daemon held %d more fds while 300 handles were read" % most)
    bad = 1
os.mkdir(m + "/gone")
h = os.open(m + "/gone", os.O_RDONLY | os.O_DIRECTORY)
os.rmdir(m + "/gone")
for i in range(100):    # push its fd out of the cache, were it not pinned
    os.stat("%s/d%d" % (m, i))
if os.fstat(h).st_nlink != 0:
    print("FAIL: a removed directory has a link count of %d" % os.fstat(h).st_nlink)
    bad = 1
if os.listdir(h):
    print("FAIL: a removed directory lists entries")
    bad = 1
os.close(h)
os.mkdir(m + "/gone2")
os.mkdir(m + "/other")
h = os.open(m + "/gone2", os.O_RDONLY | os.O_DIRECTORY)
os.rename(m + "/other", m + "/gone2")    # over the open, empty directory
for i in range(100):
    os.stat("%s/d%d" % (m, i))
if os.fstat(h).st_nlink != 0 or os.listdir(h):
    print("FAIL: a directory renamed over while open: nlink %d, entries %s" %
          (os.fstat(h).st_nlink, os.listdir(h)))
    bad = 1
os.close(h)
# a removed directory that is still a working directory (the kernel holds
# it by a lookup only): ., stat and listing work, as on ext4 (ESTALE before)
os.mkdir(m + "/cwd")
os.chdir(m + "/cwd")
os.rmdir(m + "/cwd")
for i in range(100):
    os.stat("%s/d%d" % (m, i))
try:
    st = os.stat(".")
    ents = os.listdir(".")
    if st.st_nlink != 0 or ents:
        print("FAIL: a removed working directory: nlink %d, entries %s" % (st.st_nlink, ents))
        bad = 1
except OSError as e:
    print("FAIL: a removed working directory: %s" % e)
    bad = 1
os.chdir("/")
# remove_held(PREFIX, FLAGS, WHAT): make 200 directories, hold each by
# os.open(FLAGS), remove them all; fail if the daemon then holds more than
# max_fds/4 (16) fds, and a few, between them. Returns the descriptors.
def remove_held(prefix, flags, what):
    global bad
    base = daemon_fds()
    held = []
    for i in range(200):
        os.mkdir("%s/%s%d" % (m, prefix, i))
        held.append(os.open("%s/%s%d" % (m, prefix, i), flags))
    for i in range(200):
        os.rmdir("%s/%s%d" % (m, prefix, i))
    grew = daemon_fds() - base
    print("     200 directories %s: %d more daemon fds" % (what, grew))
    if grew > 16 + 8:
        print("FAIL: the daemon holds %d more fds for directories %s" % (grew, what))
        bad = 1
    return held

# ... but not at any cost: 200 removed directories held by O_PATH
# descriptors (no OPENDIR) keep at most max_fds/4 fds between them
for h in remove_held("op", os.O_PATH, "removed while held by O_PATH"):
    os.close(h)
# nor open ones (helper-48: an open directory costs no fd until it is
# read, so a user could hold thousands and remove them, and the pins took
# every fd the daemon could open): 200 removed while open keep at most
# max_fds/4 fds between them, each lists empty with a link count of 0, and
# files are still written
held = remove_held("od", os.O_RDONLY | os.O_DIRECTORY, "removed while open")
listed = [k for k, h in enumerate(held) if os.listdir(h)]
if listed:
    print("FAIL: %d removed open directories list entries" % len(listed))
    bad = 1
linked = [k for k, h in enumerate(held) if os.fstat(h).st_nlink != 0]
if linked:
    print("FAIL: %d removed open directories have links" % len(linked))
    bad = 1
data = os.urandom(200000)
with open(m + "/after_rmdirs", "wb") as f:
    f.write(data)
    f.flush()
    os.fsync(f.fileno())
with open(m + "/after_rmdirs", "rb") as f:
    if f.read() != data:
        print("FAIL: a file written after the removals reads back different")
        bad = 1
for h in held:
    os.close(h)
sys.exit(bad)
PY
zr_umount
