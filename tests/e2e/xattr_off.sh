#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# xattr_off: -o xattr=off answers the xattr requests ENOSYS, after which the
# kernel sends none again and fails the calls with "Operation not
# supported" itself; it then no longer asks for security.capability before
# a file's first write and at every chown (two round trips a file of an
# untar). The attributes already in the backing files stay as they are, and
# a write still drops a file capability there (the daemon does that, not
# the kernel): a setcap'd binary that is overwritten loses its privilege.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "checks the daemon's answers"
zr_need_root "sets file capabilities and trusted attributes"
zr_need_tool setfattr getfattr setcap getcap

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
echo kept >"$B/old"
setfattr -n user.note -v kept "$B/old" || zr_skip "the backing filesystem (TMPDIR=${TMPDIR:-/tmp}) takes no user xattrs"
cp /bin/true "$B/capbin"
setcap cap_net_raw+ep "$B/capbin" || zr_skip "cannot set a file capability on the backing filesystem"

say "xattr=on (the default): the attributes are there"
zr_mount "" "$B" "$M"
[ "$(zr_config xattr)" = on ] || fail "config says xattr '$(zr_config xattr)', want on"
[ "$(getfattr --only-values -n user.note "$ZR_MNT/old")" = kept ] || fail "user.note of old is not seen through the mount"
zr_umount

say "xattr=off: every xattr call fails with EOPNOTSUPP"
zr_mount "xattr=off" "$B" "$M"
M=$ZR_MNT
[ "$(zr_config xattr)" = off ] || fail "config says xattr '$(zr_config xattr)', want off"
zr_expect_err "Operation not supported" getfattr -n user.note "$M/old"
zr_expect_err "Operation not supported" setfattr -n user.new -v 1 "$M/old"
zr_expect_err "Operation not supported" setfattr -x user.note "$M/old"
# asked again: the kernel answers for itself now
zr_expect_err "Operation not supported" getfattr -n user.note "$M/old"
[ -z "$(getfattr -d --absolute-names "$M/old" 2>/dev/null)" ] || fail "getfattr -d lists attributes with xattr=off"
say "files work as usual: write, chown, chmod, read"
head -c 300000 /dev/urandom >"$ZR_TMP/data"
cp "$ZR_TMP/data" "$M/new"
chown 1234:5678 "$M/new" || fail "chown failed with xattr=off"
chmod 640 "$M/new" || fail "chmod failed with xattr=off"
zr_drop_kcache
cmp "$ZR_TMP/data" "$M/new" || fail "new does not read back as written"
[ "$(stat -c %u:%g:%a "$M/new")" = 1234:5678:640 ] || fail "new is $(stat -c %u:%g:%a "$M/new"), want 1234:5678:640"
say "a write through the mount drops the file capability of the backing file"
echo overwritten >>"$M/capbin"
zr_umount
[ "$(getfattr --only-values -n user.note "$B/old")" = kept ] || fail "user.note of the backing file old was changed"
[ -z "$(getcap "$B/capbin")" ] || fail "the write through an xattr=off mount left the file capability: $(getcap "$B/capbin")"
cmp "$ZR_TMP/data" "$B/new" || fail "backing new is not the data written"
[ "$(stat -c %u:%g:%a "$B/new")" = 1234:5678:640 ] || fail "backing new is $(stat -c %u:%g:%a "$B/new"), want 1234:5678:640"
say "ok"
