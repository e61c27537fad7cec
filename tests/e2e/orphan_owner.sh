#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# orphan_owner: a file unlinked while open gets a name in the backing
# root's .zramfs/unlinked. A backing directory every user may write in (as
# /tmp's, mode 1777) let another user make that directory first, mode
# 0777: the root daemon then linked such files where that user could keep
# them, read them, or remove them, which drops the data of a file still
# open (helper-66). The daemon must not use a .zramfs or orphan directory
# that is another user's: the file is held by its fd instead, and reads
# back whole; nothing appears in the other user's directory, and the log
# says why. Then the same with only .zramfs made by the other user, and
# with the daemon's own orphan directory left mode 0777 (made 0700).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the orphan directory is the daemon's"
zr_need_root "makes directories as another user"
zr_need_tool setpriv
U=65534
as_nobody() {
	setpriv --reuid=$U --regid=$U --clear-groups -- "$@"
}

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
chmod 0755 "$ZR_TMP"
chmod 1777 "$B"
head -c 300000 /dev/urandom >"$ZR_TMP/data"

# held WHAT: write a file through the mount, unlink it while open, check
# that no link to it is in the other user's directory, read it back whole
# through its fd, close it
held() {
	python3 - "$ZR_MNT" "$B" "$ZR_TMP/data" "$1" <<'PY' || fail "$1: see above"
import os, sys
m, b, src, what = sys.argv[1:]
data = open(src, "rb").read()
fd = os.open(m + "/f", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
os.unlink(m + "/f")
d = b + "/.zramfs/unlinked"
if os.path.isdir(d) and os.stat(d).st_uid != 0 and os.listdir(d):
    sys.exit("%s: the file unlinked while open was linked into another user's %s: %s"
             % (what, d, os.listdir(d)))
if os.pread(fd, len(data) + 1, 0) != data:
    sys.exit("%s: the file unlinked while open does not read back whole" % what)
os.close(fd)
PY
}

say "another user's .zramfs/unlinked, mode 0777, made before the mount"
as_nobody mkdir -m 0777 "$B/.zramfs" "$B/.zramfs/unlinked" || fail "cannot make the directories as uid $U"
zr_mount "" "$B" "$M"
held "another user's .zramfs/unlinked"
grep -q "another user's, or others may write in it" "$ZR_LOG" ||
	fail "the log does not say why the orphan directory is not used"
zr_umount
[ -z "$(ls -A "$B/.zramfs/unlinked")" ] || fail "something was left in the other user's directory"
rm -rf "${B:?}/.zramfs"

say "another user's .zramfs, mode 0777"
as_nobody mkdir -m 0777 "$B/.zramfs" || fail "cannot make .zramfs as uid $U"
zr_mount "" "$B" "$M"
held "another user's .zramfs"
grep -q "another user's, or others may write in it" "$ZR_LOG" ||
	fail "the log does not say why .zramfs is not used"
zr_umount
rm -rf "${B:?}/.zramfs"

say "the daemon's own orphan directory, left mode 0777"
mkdir -m 0777 "$B/.zramfs" "$B/.zramfs/unlinked"
chmod 0777 "$B/.zramfs/unlinked"
zr_mount "" "$B" "$M"
python3 - "$ZR_MNT" "$B" <<'PY' || fail "see above"
import os, stat, sys
m, b = sys.argv[1:]
fd = os.open(m + "/g", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 5000)
os.unlink(m + "/g")
for d, others in ((b + "/.zramfs", 0o022), (b + "/.zramfs/unlinked", 0o077)):
    mode = stat.S_IMODE(os.stat(d).st_mode)
    if mode & others:
        sys.exit("%s is still mode %o while in use" % (d, mode))
if len(os.listdir(b + "/.zramfs/unlinked")) != 1:
    sys.exit("the file unlinked while open has no orphan's name")
os.close(fd)
PY
zr_umount
say "ok"
