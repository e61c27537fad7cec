#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# xattr_symlink_fifo: extended attributes (set, get, list, remove, a large
# value, ENODATA after removal), symbolic links (readlink, dangling, to a
# directory, a long target, lstat type), a fifo that passes data between two
# processes, a device-less node made with mknod, and a unix socket bound on
# the mount that a client can connect to.  The backing directory must hold
# the same objects after unmount.  File capabilities (setcap) are seen once
# set and dropped by a write.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_tool setfattr getfattr setcap getcap

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "" "$B" "$M"
M=$ZR_MNT

say "xattrs"
echo data >"$M/f"
setfattr -n user.color -v blue "$M/f" || fail "setfattr user.color failed"
setfattr -n user.shape -v round "$M/f" || fail "setfattr user.shape failed"
# (a value that setfattr takes as text: one starting "0x" or "0s" is hex
# or base64 to it, "bad input encoding" when it is not)
big=v$(head -c 3000 /dev/urandom | base64 -w0)
setfattr -n user.big -v "$big" "$M/f" || fail "setfattr of a ${#big}-byte value failed"
[ "$(getfattr --absolute-names --only-values -n user.color "$M/f")" = blue ] || fail "getfattr user.color wrong"
[ "$(getfattr --absolute-names --only-values -n user.big "$M/f")" = "$big" ] || fail "getfattr user.big wrong"
names=$(getfattr --absolute-names -d -m '^user\.' "$M/f" 2>/dev/null | grep -o '^user\.[a-z]*' | sort | tr '\n' ' ')
[ "$names" = "user.big user.color user.shape " ] || fail "listxattr gives '$names'"
setfattr -x user.shape "$M/f" || fail "removexattr failed"
zr_expect_err "No such attribute" getfattr --absolute-names -n user.shape "$M/f"
zr_expect_err "No such attribute" setfattr -x user.nothere "$M/f"
setfattr -n user.color -v green "$M/f" || fail "replacing an xattr failed"
mkdir "$M/dir"
setfattr -n user.dirattr -v yes "$M/dir" || fail "setfattr on a directory failed"
[ "$(getfattr --absolute-names --only-values -n user.dirattr "$M/dir")" = yes ] || fail "directory xattr wrong"

say "file capabilities: shown once set, dropped by a write (as on a local filesystem)"
# the daemon answers the kernel's questions about security.capability from
# what it knows of the file: a capability set after the file was first used
# must be seen, and a write must still drop it
printf '#!/bin/sh\n' >"$M/capbin"
chmod 755 "$M/capbin"
cat "$M/capbin" >/dev/null
setcap cap_net_raw+ep "$M/capbin" || fail "setcap failed"
getcap "$M/capbin" | grep -q cap_net_raw || fail "getcap does not show the capability just set"
echo 'exit 0' >>"$M/capbin"
sync -f "$M/capbin"
[ -z "$(getcap "$M/capbin")" ] || fail "a write did not drop the file capability: $(getcap "$M/capbin")"
setcap cap_net_raw+ep "$M/capbin" || fail "setcap (again) failed"
setcap -r "$M/capbin" || fail "setcap -r failed"
[ -z "$(getcap "$M/capbin")" ] || fail "setcap -r left a capability"
setcap cap_net_raw+ep "$M/capbin" || fail "setcap (third) failed"
getcap "$M/capbin" | grep -q cap_net_raw || fail "getcap does not show the capability set after a removal"

say "symlinks"
ln -s f "$M/link" || fail "symlink failed"
[ "$(readlink "$M/link")" = f ] || fail "readlink gives '$(readlink "$M/link")'"
[ "$(cat "$M/link")" = data ] || fail "reading through the symlink failed"
[ "$(stat -c %F "$M/link")" = "symbolic link" ] || fail "lstat type is $(stat -c %F "$M/link")"
ln -s does/not/exist "$M/dangling"
[ "$(readlink "$M/dangling")" = does/not/exist ] || fail "dangling symlink target wrong"
[ ! -e "$M/dangling" ] || fail "dangling symlink resolves"
ln -s dir "$M/dirlink"
touch "$M/dirlink/inside" || fail "creating through a symlink to a directory failed"
[ -f "$M/dir/inside" ] || fail "file created through dirlink not in dir"
long=$(printf 'x%.0s' $(seq 1 1000))/$(printf 'y%.0s' $(seq 1 1000))
ln -s "$long" "$M/longlink" || fail "symlink with a 2001-byte target failed"
[ "$(readlink "$M/longlink")" = "$long" ] || fail "long symlink target changed"
ln -s /etc/passwd "$M/abs"
[ "$(readlink "$M/abs")" = /etc/passwd ] || fail "absolute symlink target wrong"

say "fifo"
mkfifo "$M/fifo" || fail "mkfifo failed"
[ "$(stat -c %F "$M/fifo")" = fifo ] || fail "fifo type is $(stat -c %F "$M/fifo")"
(echo "through the fifo" >"$M/fifo") &
wp=$!
got=$(timeout 10 cat "$M/fifo") || fail "reading the fifo failed or hung"
wait "$wp" || fail "fifo writer failed"
[ "$got" = "through the fifo" ] || fail "fifo passed '$got'"
mknod "$M/fifo2" p || fail "mknod p failed"
[ "$(stat -c %F "$M/fifo2")" = fifo ] || fail "mknod p made a $(stat -c %F "$M/fifo2")"

if command -v python3 >/dev/null; then
	say "unix socket bound on the mount"
	timeout 20 python3 - "$M/sock" <<'PY' || fail "unix socket on the mount failed"
import os, socket, stat, sys
path = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(1)
assert stat.S_ISSOCK(os.lstat(path).st_mode), "not a socket"
cli = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cli.connect(path)
conn, _ = srv.accept()
cli.sendall(b"ping")
assert conn.recv(4) == b"ping", "wrong data"
PY
	[ "$(stat -c %F "$M/sock")" = socket ] || fail "sock is a $(stat -c %F "$M/sock")"
else
	say "python3 absent: unix socket not checked"
fi
zr_umount

say "checking the backing directory"
[ "$(getfattr --absolute-names --only-values -n user.color "$B/f")" = green ] || fail "backing xattr user.color wrong"
[ "$(getfattr --absolute-names --only-values -n user.big "$B/f")" = "$big" ] || fail "backing xattr user.big wrong"
zr_expect_err "No such attribute" getfattr --absolute-names -n user.shape "$B/f"
[ "$(readlink "$B/link")" = f ] || fail "backing symlink wrong"
[ "$(readlink "$B/longlink")" = "$long" ] || fail "backing long symlink wrong"
[ "$(stat -c %F "$B/fifo")" = fifo ] || fail "backing fifo is a $(stat -c %F "$B/fifo")"
[ -f "$B/dir/inside" ] || fail "backing dir/inside missing"
getcap "$B/capbin" | grep -q cap_net_raw || fail "backing capbin lost its capability"
grep -q 'exit 0' "$B/capbin" || fail "backing capbin lost the appended line"
