#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# caps_edges: the daemon answers the kernel's security.capability questions
# from what it knows of a file only where that knowledge holds, so that
# getxattr through the mount says what the backing file says: on a
# filesystem without xattrs (ramfs) mounted inside the backing directory,
# a file created through the mount answers "Operation not supported", as
# the filesystem itself does, not "No such attribute".
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "mounts a ramfs"
zr_need_tool getfattr
zr_real || zr_skip "checks the daemon's answers"

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B/ram" "$M"
mount -t ramfs ramfs "$B/ram" || zr_skip "cannot mount a ramfs"
echo old >"$B/ram/old"

say "a filesystem without xattrs inside the backing directory"
zr_mount "" "$B" "$M"
echo new >"$ZR_MNT/ram/new" || fail "cannot create a file on the inner ramfs"
echo data >"$ZR_MNT/top"
zr_expect_err "Operation not supported" getfattr --absolute-names -n security.capability "$ZR_MNT/ram/new"
zr_expect_err "Operation not supported" getfattr --absolute-names -n security.capability "$ZR_MNT/ram/old"
zr_expect_err "No such attribute" getfattr --absolute-names -n security.capability "$ZR_MNT/top"
zr_umount
umount "$B/ram" || fail "cannot unmount the inner ramfs"
