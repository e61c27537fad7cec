#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# cache_none_mtime: with cache=none (no tier: every WRITE goes to the
# backing file as it comes) the mtime a file showed before the unmount is
# the one it has after it. The kernel keeps the mtime itself (its
# writeback cache) and sends it in a SETATTR, but a WRITE of its cached
# data can reach the daemon after that SETATTR (at the close here), and
# the daemon's pwrite moved the backing file's mtime for good: 0.2-0.4 s
# later than what the mount had shown (helper-81's fuzzer; the files here
# are its reproducer: a write, then fsetxattr, fchmod or nothing, then a
# close).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the backing file's mtime is the daemon's doing"
zr_need_tool python3

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "cache=none" "$B" "$M"
M=$ZR_MNT

for act in setxattr fchmod none; do
	python3 - "$M/$act" "$act" >"$ZR_TMP/$act.shown" <<'PY' || fail "writing $act failed"
import os, sys, time
p, act = sys.argv[1:3]
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(fd, b"x" * 100000, 0)
time.sleep(0.2)
if act == "setxattr":
    os.setxattr(fd, "user.b", b"v" * 76)
elif act == "fchmod":
    os.fchmod(fd, 0o600)
time.sleep(0.2)
os.close(fd)
print(os.stat(p).st_mtime_ns)
PY
done
zr_umount
zr_mount "cache=none" "$B" "$M"
for act in setxattr fchmod none; do
	shown=$(cat "$ZR_TMP/$act.shown")
	back=$(stat -c %.9Y "$B/$act" | tr -d .)
	now=$(stat -c %.9Y "$M/$act" | tr -d .)
	say "$act: mtime shown $shown, backing $back, after the remount $now"
	[ "$back" = "$shown" ] && [ "$now" = "$shown" ] ||
		fail "$act: the mtime moved across the unmount (shown $shown, backing $back, remounted $now)"
	[ "$(stat -c %s "$M/$act")" = 100000 ] || fail "$act: size $(stat -c %s "$M/$act"), not 100000"
done
zr_umount
say "ok: cache=none keeps the mtime the mount showed"
