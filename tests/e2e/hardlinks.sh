#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# hardlinks: two names of one file share one inode and one cache.  A write
# through one name is read at once through the other (also for links that
# existed in the backing directory before the mount), the daemon does not
# count the file twice, and unlinking one name keeps the data.  Last: the
# only name the daemon knows of a file with another link goes while the file
# is open with dirty data, and its fd is pushed out of the cache (max_fds=16):
# reads and writes through the open fd go on, and every byte lands under the
# other name.
. "$(dirname "$0")/lib.sh"
zr_init

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/d1" "$B/d2" "$M"
head -c 1000000 /dev/urandom >"$ZR_TMP/data1"
head -c 3000000 /dev/urandom >"$ZR_TMP/data2"
# Links made before the mount: the daemon must find they are one file.
echo "before the mount" >"$B/d1/pre_a"
ln "$B/d1/pre_a" "$B/d2/pre_b"

zr_mount "size=64M,dirty_expire=1h" "$B" "$M"
M=$ZR_MNT

say "write through a, link b, read through b"
cp "$ZR_TMP/data1" "$M/d1/a"
ln "$M/d1/a" "$M/d2/b"
cmp "$ZR_TMP/data1" "$M/d2/b" || fail "b does not show what was written through a"
[ "$(stat -c %i "$M/d1/a")" = "$(stat -c %i "$M/d2/b")" ] ||
	fail "a and b have different inode numbers"
[ "$(stat -c %h "$M/d1/a")" = 2 ] || fail "link count of a is $(stat -c %h "$M/d1/a"), expected 2"
files1=$(zr_stat files)

say "overwrite through b (same size, new bytes), read through a at once"
dd if="$ZR_TMP/data2" of="$M/d2/b" bs=64k conv=notrunc status=none
cmp "$ZR_TMP/data2" "$M/d1/a" || fail "a does not show what was written through b"
say "append through a, read through b"
head -c 4096 /dev/zero >>"$M/d1/a"
[ "$(stat -c %s "$M/d2/b")" = 3004096 ] || fail "size through b is $(stat -c %s "$M/d2/b")"
if zr_stats_on; then
	files2=$(zr_stat files)
	say "files: $files1 after a, $files2 after writing through b"
	[ "$files2" = "$files1" ] || fail "files went from $files1 to $files2: the link is counted twice"
fi

say "links made before the mount"
[ "$(stat -c %i "$M/d1/pre_a")" = "$(stat -c %i "$M/d2/pre_b")" ] ||
	fail "pre-existing links have different inode numbers"
echo "written through pre_b" >"$M/d2/pre_b"
[ "$(cat "$M/d1/pre_a")" = "written through pre_b" ] ||
	fail "pre_a shows '$(cat "$M/d1/pre_a")'"

say "unlink a: b keeps the data"
rm "$M/d1/a"
[ "$(stat -c %h "$M/d2/b")" = 1 ] || fail "link count of b is $(stat -c %h "$M/d2/b"), expected 1"
zr_drop_kcache
{ cat "$ZR_TMP/data2"; head -c 4096 /dev/zero; } >"$ZR_TMP/expect"
cmp "$ZR_TMP/expect" "$M/d2/b" || fail "b lost data when a was unlinked"
zr_ctl writeback all
zr_umount

cmp "$ZR_TMP/expect" "$B/d2/b" || fail "backing d2/b differs after unmount"
[ ! -e "$B/d1/a" ] || fail "backing still has d1/a"
[ "$(cat "$B/d1/pre_a")" = "written through pre_b" ] || fail "backing d1/pre_a is wrong"
[ "$(stat -c %h "$B/d1/pre_a")" = 2 ] || fail "backing pre_a lost its link"

zr_mount "" "$B" "$M"
cmp "$ZR_TMP/expect" "$ZR_MNT/d2/b" || fail "d2/b differs after remount"
zr_umount

say "the only known name of a linked file goes while it is open and dirty"
mkdir -p "$B/e"
head -c 200000 /dev/urandom >"$B/e/x"
ln "$B/e/x" "$B/e/y"
for i in $(seq 40); do echo "other $i" >"$B/e/o$i"; done
head -c 100000 /dev/urandom >"$ZR_TMP/new1"
head -c 100000 /dev/urandom >"$ZR_TMP/new2"
zr_mount "max_fds=16,dirty_expire=1h" "$B" "$M"
python3 - "$ZR_MNT/e" "$ZR_TMP/new1" "$ZR_TMP/new2" <<'PY' || fail "the file became unreachable through its open fd"
import os, sys
d, new1, new2 = sys.argv[1], open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
with open(d + "/x", "r+b") as f:   # new1 is dirty in the daemon after this close
    f.write(new1)
fd = os.open(d + "/x", os.O_RDWR)
os.unlink(d + "/x")                 # the only name the daemon has seen
for i in range(1, 41):              # push x's fd out of the daemon's cache
    open("%s/o%d" % (d, i)).read()
os.pwrite(fd, new2, 100000)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
if os.pread(fd, 200000, 0) != new1 + new2:
    sys.exit("read through the open fd: wrong data")
os.pwrite(fd, b"tail", 200000)      # written back after the last close
os.close(fd)
PY
{ cat "$ZR_TMP/new1" "$ZR_TMP/new2"; printf tail; } >"$ZR_TMP/expect_y"
zr_ctl writeback all
[ "$(zr_stat blocks_dirty)" = 0 ] || fail "dirty blocks left after 'writeback all'"
[ "$(zr_stat writeback_errors)" = 0 ] || fail "writeback errors: $(zr_stat writeback_errors)"
zr_drop_kcache
cmp "$ZR_TMP/expect_y" "$ZR_MNT/e/y" || fail "y does not hold what was written through x"
zr_umount
cmp "$ZR_TMP/expect_y" "$B/e/y" || fail "backing e/y does not hold what was written through x"
[ ! -e "$B/e/x" ] || fail "backing still has e/x"
