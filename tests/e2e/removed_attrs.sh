#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# removed_attrs: a file or directory that is removed while the kernel still
# holds its inode is asked about afterwards: the kernel writes back its
# times (a SETATTR) after the rm of a file written through the writeback
# cache, and an O_PATH descriptor or a working directory reaches it by
# fstat. On a local filesystem these succeed, with a link count of 0.
#  1. files untarred the way tar does it (data, fchown, fchmod, utimens),
#     then rm -rf, three rounds, each ended by `sync -f`: the daemon
#     answered the kernel's SETATTR of each removed file with ESTALE, and
#     syncfs(2) of the mount then failed with ESTALE (found while timing an
#     untar for the benchmarks).
#  2. fstat through an O_PATH descriptor of a removed file: nlink 0, its
#     size, mode and owner; the kernel's later requests for it succeed.
#     A chmod and a utime through the descriptor after the unlink stick.
#  3. a removed working directory beyond the daemon's pinned-fd cap: stat .
#     gives nlink 0 (dir_handles.sh covers the ones it keeps an fd for).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_tool python3 tar

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M" "$ZR_TMP/src"
for d in 1 2 3 4; do
	mkdir -p "$ZR_TMP/src/d$d"
	for f in $(seq 1 150); do
		head -c $((f * 37)) /dev/urandom >"$ZR_TMP/src/d$d/f$f"
		chmod 640 "$ZR_TMP/src/d$d/f$f"
	done
done
chown -R 1234:2345 "$ZR_TMP/src"
tar -C "$ZR_TMP/src" -cf "$ZR_TMP/t.tar" .
zr_mount "max_fds=64" "$B" "$M"
M=$ZR_MNT

say "untar, rm -rf, sync -f: three rounds"
for r in 1 2 3; do
	mkdir "$M/x"
	tar -C "$M/x" --same-owner -xf "$ZR_TMP/t.tar" || fail "round $r: untar failed"
	rm -rf "$M/x" || fail "round $r: rm -rf failed"
	sync -f "$M" 2>"$ZR_TMP/err" || fail "round $r: sync -f after rm -rf failed: $(cat "$ZR_TMP/err")"
done
mkdir "$M/x"
tar -C "$M/x" --same-owner -xf "$ZR_TMP/t.tar"
sync -f "$M/x" || fail "sync -f of a new directory failed"
diff -r "$ZR_TMP/src" "$M/x" || fail "untarred tree differs"

say "fstat through O_PATH descriptors of removed files and a removed cwd"
python3 - "$M" <<'PY' || fail "see above"
import os, sys
m = sys.argv[1]
bad = 0
fds = []
for i in range(200):
    p = "%s/g%d" % (m, i)
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"y" * (100 + i))
    os.close(fd)
    os.chmod(p, 0o640)
    os.chown(p, 1000 + i, 2000)
    fds.append(os.open(p, os.O_PATH))
    # a close makes the kernel forget st_blocks (writeback cache): the
    # fstat below must ask the daemon
    os.close(os.open(p, os.O_RDONLY))
    os.unlink(p)
for i, fd in enumerate(fds):
    try:
        st = os.fstat(fd)
    except OSError as e:
        print("     g%d: fstat: %s" % (i, e))
        bad += 1
        continue
    if (st.st_nlink, st.st_size, st.st_mode & 0o7777, st.st_uid) != (0, 100 + i, 0o640, 1000 + i):
        print("     g%d: nlink %d size %d mode %o uid %d" %
              (i, st.st_nlink, st.st_size, st.st_mode & 0o7777, st.st_uid))
        bad += 1
    os.close(fd)
# a change made through the descriptor sticks, whether or not the daemon
# still had the deleted file's fd cached (a reviewer's case: chmod went to
# the cached fd, then, with the fd gone from the cache, fstat showed the
# mode from before)
h = "%s/h" % m
fd = os.open(h, os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, b"z" * 3000)
os.close(fd)
os.chmod(h, 0o644)
p = os.open(h, os.O_PATH)
os.unlink(h)
os.chmod("/proc/self/fd/%d" % p, 0o600)
for i in range(100):       # max_fds=64: the fd cache turns over
    os.close(os.open("%s/churn%d" % (m, i), os.O_CREAT | os.O_WRONLY, 0o600))
os.utime("/proc/self/fd/%d" % p, (1000000, 2000000))
st = os.fstat(p)
if (st.st_mode & 0o7777, st.st_mtime, st.st_nlink, st.st_size) != (0o600, 2000000, 0, 3000):
    print("     h: mode %o mtime %d nlink %d size %d, expected 600 2000000 0 3000" %
          (st.st_mode & 0o7777, st.st_mtime, st.st_nlink, st.st_size))
    bad += 1
os.close(p)
# more removed working directories than the daemon keeps fds for
# (max_fds=64: a quarter of it, at least 16)
pids = []
for i in range(40):
    d = "%s/cwd%d" % (m, i)
    os.mkdir(d)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.chdir(d)
        os.close(w)
        os.read(r, 1)          # rmdir done
        try:
            st = os.stat(".")
            ok = st.st_nlink == 0
        except OSError as e:
            print("     cwd%d: stat .: %s" % (i, e))
            ok = False
        os._exit(0 if ok else 1)
    os.close(r)
    pids.append((pid, w, d))
import time
time.sleep(0.2)
for pid, w, d in pids:
    os.rmdir(d)
for pid, w, d in pids:
    os.write(w, b"x")
    os.close(w)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        bad += 1
print("     %d failures" % bad)
sys.exit(1 if bad else 0)
PY
sync -f "$M" || fail "sync -f at the end failed"
zr_umount
