#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# unpriv_readonly: a daemon run by an unprivileged user (mounted through
# fusermount3) writes back the files that user made read-only, as git does
# its objects (created 0444 through a writable descriptor) and `install -m
# 444` its copies, once their fds have left the cache (max_fds=16): the
# reopen for writing gets EACCES, and the read-only fd it fell back to made
# every writeback of them fail with EBADF, the unmount's for ever.  After
# `writeback all` and `zramfsctl umount` by that user (which unmounts
# through fusermount3: umount(2) is root's), every file is whole in the
# backing directory and still mode 444; so is a file made mode 000 (the
# reopen got no fd at all: it is opened with u+r for that moment), one of
# mode 200, and two made writable again after their read-only fds were
# cached: one appended to, one truncated by name (no open, so the fd stayed
# read-only and the truncate failed with EINVAL). With cache=none, a writer
# whose file was made 0444 while open, its fd reopened read-only, goes on.
# Its config shows read_ahead 0: the window needs root to be set. Root's
# zramfsctl umount of that mount (without allow_other) says that only its
# user may, and unmounts nothing.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "runs the daemon as an unprivileged user"
zr_need_root "switches to an unprivileged user"
zr_need_tool setpriv fusermount3
# (users mount through fusermount3, which needs to be set-user-ID root)
[ -u "$(command -v fusermount3)" ] ||
	zr_skip "fusermount3 is not set-user-ID root: other users cannot mount"
[ -x /usr/bin/python3 ] || zr_skip "needs /usr/bin/python3 (run as another user)"
U=nobody
id -u "$U" >/dev/null 2>&1 || zr_skip "no user $U"
G=$(id -gn "$U")

# as_user CMD...: CMD run as $U (the mount is $U's: root cannot enter it
# without allow_other)
as_user() { setpriv --reuid="$U" --regid="$G" --clear-groups -- "$@"; }

# libfuse opens /dev/fuse itself before it asks fusermount3 to mount;
# Debian's udev makes it 0666, a container may not
fmode=$(stat -c %a /dev/fuse)
if [ "$fmode" != 666 ]; then
	ZR_ATEXIT+=("chmod $fmode /dev/fuse")
	chmod 666 /dev/fuse || zr_skip "cannot open /dev/fuse to other users"
fi
chmod 711 "$ZR_TMP"
D=$ZR_TMP/u
mkdir -p "$D/back" "$D/mnt" "$D/src"
install -m 755 "$ZRAMFS" "$D/zramfs"
install -m 755 "$ZRAMFSCTL" "$D/zramfsctl"
printf '#!/bin/sh\nexec setpriv --reuid=%s --regid=%s --clear-groups -- %s "$@"\n' \
	"$U" "$G" "$D/zramfs" >"$ZR_TMP/as_user_zramfs"
chmod 755 "$ZR_TMP/as_user_zramfs"
N=40
for i in $(seq $N); do head -c $((20000 + i * 977)) /dev/urandom >"$D/src/f$i"; done
head -c 30000 /dev/urandom >"$D/src/z"
head -c 30000 /dev/urandom >"$D/src/w"
head -c 30000 /dev/urandom >"$D/src/a"
head -c 30000 /dev/urandom >"$D/src/t"
chown -R "$U:$G" "$D"

ZRAMFS=$ZR_TMP/as_user_zramfs zr_mount "max_fds=16,dirty_expire=1h,seq_cutoff=0" "$D/back" "$D/mnt"
[ "$(stat -c %u "/proc/$ZR_PID")" != 0 ] || fail "the daemon runs as root"
# the read-ahead window cannot be set without root: the config says what
# is in effect, the kernel's default (it said 1m; helper-66)
# (the daemon tries just after its INIT reply: a request may come first)
for i in $(seq 20); do
	ra=$(as_user awk '$1 == "read_ahead" { print $2 }' "$D/mnt/.zramfs/config")
	[ "$ra" != 0 ] || break
	sleep 0.1
done
[ "$ra" = 0 ] || fail "config shows read_ahead '$ra' in a daemon that cannot set it, not 0"
say "$N files made read-only as git and install do, through the mount, by $U"
as_user /usr/bin/python3 - "$D/src" "$D/mnt" "$N" <<'PY' || fail "writing the files as $U failed"
import os, shutil, sys
src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
# written, then made unreadable to its owner too (chmod 000): the reopen
# gets no fd at all, even to read
shutil.copyfile(src + "/z", mnt + "/z")
os.chmod(mnt + "/z", 0)
# write-only to its owner (0200): opened with u+r, it must be opened for
# writing too
shutil.copyfile(src + "/w", mnt + "/w")
os.chmod(mnt + "/w", 0o200)
# made read-only, its fd pushed out and reopened read-only (a read), then
# writable again and appended to: the writeback must not use that fd
data = open(src + "/a", "rb").read()
with open(mnt + "/a", "wb") as f:
    f.write(data[:20000])
os.chmod(mnt + "/a", 0o444)
shutil.copyfile(src + "/t", mnt + "/t")
os.chmod(mnt + "/t", 0o444)
for i in range(20):
    open("%s/pad%d" % (mnt, i), "w").close()
open(mnt + "/a", "rb").read()
open(mnt + "/t", "rb").read()
os.chmod(mnt + "/a", 0o644)
with open(mnt + "/a", "ab") as f:
    f.write(data[20000:])
# truncate(2) by name: no OPEN reaches the daemon
os.chmod(mnt + "/t", 0o644)
os.truncate(mnt + "/t", 10000)
for i in range(1, n + 1):
    data = open("%s/f%d" % (src, i), "rb").read()
    if i % 2:
        # git: created 0444, written through that descriptor
        fd = os.open("%s/f%d" % (mnt, i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(fd, data)
        os.close(fd)
    else:
        # install -m 444: a copy, then chmod
        shutil.copyfile("%s/f%d" % (src, i), "%s/f%d" % (mnt, i))
        os.chmod("%s/f%d" % (mnt, i), 0o444)
PY
stats() { as_user cat "$D/mnt/.zramfs/stats"; }
d=$(stats | awk '$1 == "blocks_dirty" { print $2 }')
say "blocks_dirty $d"
[ "${d:-0}" -gt 0 ] || fail "no dirty blocks: the case is not tested"
as_user sh -c "echo 'writeback all' >'$D/mnt/.zramfs/control'" ||
	fail "'writeback all' failed: $(stats | grep -E '^(writeback_errors|blocks_dirty) ' | tr '\n' ' ')"
e=$(stats | awk '$1 == "writeback_errors" { print $2 }')
[ "$e" = 0 ] || fail "writeback_errors is $e"
# root cannot reach a mount made without allow_other: zramfsctl says so,
# and unmounts nothing (helper-66: it told root that only the owner or
# root may)
zr_expect_err "lets in only the user who mounted it" "$ZRAMFSCTL" umount "$D/mnt"
zr_is_mounted "$D/mnt" || fail "zramfsctl umount by root unmounted it without its writeback"
# (zramfsctl umount as that user: through fusermount3, which it runs
# when umount(2) says EPERM; it returns once the daemon has exited)
as_user "$D/zramfsctl" umount "$D/mnt" || fail "zramfsctl umount as $U failed"
zr_running "$ZR_PID" && fail "the daemon still runs after zramfsctl umount returned"
zr_wait_pid "$ZR_PID" 60 || fail "the daemon did not exit within 60 s of the unmount"
rc=$ZR_WAIT_RC
ZR_PID=
[ "$rc" = 0 ] || fail "the daemon exited with status $rc"
for i in $(seq $N); do
	cmp -s "$D/src/f$i" "$D/back/f$i" || fail "f$i is not whole in the backing directory"
	[ "$(stat -c %a "$D/back/f$i")" = 444 ] || fail "f$i is mode $(stat -c %a "$D/back/f$i") on disk, not 444"
done
cmp -s "$D/src/z" "$D/back/z" || fail "z (chmod 000) is not whole in the backing directory"
[ "$(stat -c %a "$D/back/z")" = 0 ] || fail "z is mode $(stat -c %a "$D/back/z") on disk, not 000"
cmp -s "$D/src/w" "$D/back/w" || fail "w (chmod 200) is not whole in the backing directory"
[ "$(stat -c %a "$D/back/w")" = 200 ] || fail "w is mode $(stat -c %a "$D/back/w") on disk, not 200"
cmp -s "$D/src/a" "$D/back/a" || fail "a (0444, then 0644 and appended to) is not whole in the backing directory"
head -c 10000 "$D/src/t" | cmp -s - "$D/back/t" ||
	fail "t (0444, then 0644 and truncated by name to 10000 bytes) is not so in the backing directory ($(stat -c %s "$D/back/t") bytes)"
say "ok: $N read-only files, one of mode 000, one of 200 and two made writable again whole on disk, their modes kept"

# cache=none: writes go straight to the backing file through the cached
# fd, which may have been reopened read-only while a writer held the file
# open (the file made 0444 meanwhile): the writer got EROFS
mkdir -p "$D/back2" "$D/mnt2"
chown "$U:$G" "$D/back2" "$D/mnt2"
ZRAMFS=$ZR_TMP/as_user_zramfs zr_mount "cache=none,max_fds=16" "$D/back2" "$D/mnt2"
say "a file made 0444 while its writer holds it open, its fd reopened read-only (cache=none)"
as_user /usr/bin/python3 - "$D/src" "$D/mnt2" <<'PY' || fail "writing as $U through cache=none failed"
import os, sys
src, mnt = sys.argv[1], sys.argv[2]
data = open(src + "/a", "rb").read()
with open(mnt + "/o", "wb", buffering=0) as f:
    f.write(data[:10000])
    os.chmod(mnt + "/o", 0o444)
    for i in range(20):
        open("%s/pad%d" % (mnt, i), "w").close()
    open(mnt + "/o", "rb").read()
    f.write(data[10000:])
PY
as_user "$D/zramfsctl" umount "$D/mnt2" || fail "zramfsctl umount of the cache=none mount failed"
zr_wait_pid "$ZR_PID" 60 || fail "the cache=none daemon did not exit within 60 s"
ZR_PID=
cmp -s "$D/src/a" "$D/back2/o" || fail "o (cache=none) is not whole in the backing directory"
say "ok: the writer went on, the file is whole"
