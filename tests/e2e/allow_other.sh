#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# allow_other: with -o allow_other, a second user (nobody, 65534) reaches the
# mount, permissions are enforced like on a local filesystem, and what that
# user creates (file, directory, symlink, fifo) is owned by that user, in the
# mount and in the backing directory.  A passthrough that creates everything
# as root, or that lets anyone do anything, fails here. A new entry whose
# chown to its creator fails (EDQUOT, injected) is removed, not left as
# root's. A CREATE that meets a file made behind the kernel's back (which
# it could not check) is checked by the file's mode, or by its access ACL
# (the daemon answers ESTALE, and the kernel looks again and checks it).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "switches to another user"
zr_need_tool setpriv
U=65534

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
chmod 0755 "$ZR_TMP" "$B" "$M"
zr_mount "allow_other" "$B" "$M"
M=$ZR_MNT

# as_nobody CMD...: runs CMD as uid/gid 65534 with no supplementary groups.
as_nobody() {
	setpriv --reuid=$U --regid=$U --clear-groups -- "$@"
}

mkdir -m 0755 "$M/rootdir"
mkdir "$M/pub"
chmod 1777 "$M/pub"
echo secret >"$M/secret"
chmod 0600 "$M/secret"
echo "root's" >"$M/pub/rootfile"
echo public >"$M/readable"
chmod 0644 "$M/readable"

say "nobody can read a 0644 file, not a 0600 one"
[ "$(as_nobody cat "$M/readable")" = public ] || fail "nobody cannot read a 0644 file"
zr_expect_err "Permission denied" as_nobody cat "$M/secret"
say "nobody cannot create in a root-owned 0755 directory"
zr_expect_err "Permission denied" as_nobody touch "$M/rootdir/x"
zr_expect_err "Permission denied" as_nobody mkdir "$M/rootdir/d"
[ ! -e "$M/rootdir/x" ] || fail "rootdir/x exists after a denied create"
zr_expect_err "Permission denied" as_nobody bash -c "echo x >>'$M/readable'"
say "nobody cannot remove root's file from a sticky directory"
zr_expect_err "Operation not permitted" as_nobody rm -f "$M/pub/rootfile"
zr_expect_err "Operation not permitted" as_nobody chmod 0777 "$M/readable"

say "nobody creates in a 1777 directory: owned by $U:$U"
as_nobody bash -c "echo mine >'$M/pub/file'" || fail "nobody cannot create in a 1777 directory"
as_nobody mkdir "$M/pub/dir" || fail "nobody cannot mkdir in a 1777 directory"
as_nobody ln -s file "$M/pub/link" || fail "nobody cannot symlink"
as_nobody mkfifo "$M/pub/fifo" || fail "nobody cannot mkfifo"
as_nobody bash -c "echo sub >'$M/pub/dir/f'" || fail "nobody cannot create in its own directory"
for f in file dir link fifo dir/f; do
	own=$(stat -c %u:%g "$M/pub/$f")
	[ "$own" = "$U:$U" ] || fail "pub/$f is owned by $own through the mount, expected $U:$U"
done
[ "$(as_nobody cat "$M/pub/file")" = mine ] || fail "nobody cannot read its own file"
as_nobody chmod 0600 "$M/pub/file" || fail "nobody cannot chmod its own file"
[ "$(stat -c %a "$M/pub/file")" = 600 ] || fail "chmod by nobody did not apply"
zr_expect_err "Operation not permitted" as_nobody chown 0 "$M/pub/file"

say "a CREATE that meets a file made behind the kernel's negative entry"
# nobody's lookups leave negative entries; root then makes the files in
# the backing directory. nobody's O_CREAT opens reach the daemon as CREATE
# of an existing file: its permissions hold, and it stays root's
for f in late shared acc3; do
	! as_nobody stat "$M/pub/$f" >/dev/null 2>&1 || fail "pub/$f exists already"
done
echo secret >"$B/pub/late" && chmod 0600 "$B/pub/late"
echo open >"$B/pub/shared" && chmod 0666 "$B/pub/shared"
echo ioctl >"$B/pub/acc3" && chmod 0644 "$B/pub/acc3"
# O_ACCMODE 3 (neither read nor write, for ioctls) wants read and write
# permission, as the kernel checks it (Linux 6.18 sends it to the daemon
# as O_RDWR; older kernels send the 3, which the daemon must read so)
zr_expect_err "Permission denied" as_nobody bash -c "/usr/bin/python3 -c '
import os, sys
os.open(sys.argv[1], 3 | os.O_CREAT, 0o644)' '$M/pub/acc3'"
zr_expect_err "Permission denied" as_nobody bash -c "echo x >>'$M/pub/late'"
as_nobody bash -c "echo more >>'$M/pub/shared'" || fail "nobody cannot append to a 0666 file through O_CREAT"
for f in late shared; do
	[ "$(stat -c %u:%g "$B/pub/$f")" = 0:0 ] ||
		fail "backing pub/$f, root's, is now owned by $(stat -c %u:%g "$B/pub/$f")"
done
[ "$(cat "$B/pub/late")" = secret ] || fail "backing pub/late changed: $(cat "$B/pub/late")"
[ "$(stat -c %a "$B/pub/late")" = 600 ] || fail "backing pub/late mode is now $(stat -c %a "$B/pub/late")"
if command -v setfacl >/dev/null; then
	say "the same CREATE, of files with access ACLs: the ACL decides"
	# a 0666 file that denies nobody by name, a 0600 one that grants it
	# rw, one that grants the group nobody is in but masks it to r
	for f in acl-deny acl-grant acl-mask; do
		! as_nobody stat "$M/pub/$f" >/dev/null 2>&1 || fail "pub/$f exists already"
	done
	echo deny >"$B/pub/acl-deny" && chmod 0666 "$B/pub/acl-deny" && setfacl -m u:$U:--- "$B/pub/acl-deny"
	echo grant >"$B/pub/acl-grant" && chmod 0600 "$B/pub/acl-grant" && setfacl -m u:$U:rw "$B/pub/acl-grant"
	echo mask >"$B/pub/acl-mask" && chmod 0600 "$B/pub/acl-mask" && setfacl -m g:$U:rw,m::r "$B/pub/acl-mask"
	zr_expect_err "Permission denied" as_nobody bash -c "echo x >>'$M/pub/acl-deny'"
	as_nobody bash -c "echo more >>'$M/pub/acl-grant'" ||
		fail "nobody cannot append through O_CREAT to a file whose ACL grants it rw"
	zr_expect_err "Permission denied" as_nobody bash -c "echo x >>'$M/pub/acl-mask'"
	# a caller in 70 groups, the last of which the ACL denies, opens it
	# to read: all of them are read (the first 64 only were, and other's
	# r let it in)
	! as_nobody stat "$M/pub/acl-groups" >/dev/null 2>&1 || fail "pub/acl-groups exists already"
	echo groups >"$B/pub/acl-groups" && chmod 0604 "$B/pub/acl-groups" &&
		setfacl -m g:1070:---,m::rw "$B/pub/acl-groups"
	zr_expect_err "Permission denied" setpriv --reuid=$U --regid=$U \
		--groups="$(seq -s, 1001 1070)" -- bash -c "python3 -c '
import os, sys
os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644)' '$M/pub/acl-groups'"
	[ "$(cat "$B/pub/acl-deny")" = deny ] || fail "backing pub/acl-deny changed: $(cat "$B/pub/acl-deny")"
	[ "$(cat "$B/pub/acl-mask")" = mask ] || fail "backing pub/acl-mask changed: $(cat "$B/pub/acl-mask")"
	zr_umount
	zr_mount "allow_other" "$B" "$M"
	M=$ZR_MNT
	[ "$(cat "$M/pub/acl-grant")" = "$(printf 'grant\nmore')" ] ||
		fail "pub/acl-grant after a remount: $(cat "$M/pub/acl-grant")"
else
	# the README's and .ci/run's install line has the acl package
	say "SKIP the CREATE of files with access ACLs: no setfacl (package acl)"
fi
zr_umount

say "checking ownership in the backing directory"
for f in file dir link fifo dir/f; do
	own=$(stat -c %u:%g "$B/pub/$f")
	[ "$own" = "$U:$U" ] || fail "backing pub/$f is owned by $own, expected $U:$U"
done
[ "$(cat "$B/pub/file")" = mine ] || fail "backing pub/file content wrong"
[ ! -e "$B/rootdir/x" ] || fail "backing has rootdir/x"

if zr_real; then
	say "a new entry that cannot be given to its creator is taken back"
	# fchownat fails with EDQUOT on names "quota*": the file, directory
	# and fifo must not stay behind as root's
	FAULT=$(zr_helper zr_fault.so)
	# make_as_nobody KIND: nobody makes pub/quota-KIND (file, dir or fifo)
	make_as_nobody() {
		case $1 in
		file) as_nobody bash -c "echo x >'$ZR_MNT/pub/quota-file'" ;;
		dir) as_nobody mkdir "$ZR_MNT/pub/quota-dir" ;;
		fifo) as_nobody mkfifo "$ZR_MNT/pub/quota-fifo" ;;
		esac
	}
	touch "$ZR_TMP/armed"
	for kind in file dir fifo; do
		ZR_FAULT_ARMED=$ZR_TMP/armed ZR_FAULT_CHOWN=1 ZR_FAULT_NAME=quota-$kind \
			zr_mount_fault "allow_other" "$B" "$M"
		zr_expect_err "Disk quota exceeded" make_as_nobody "$kind"
		[ ! -e "$B/pub/quota-$kind" ] ||
			fail "backing pub/quota-$kind stayed behind, owned by $(stat -c %u:%g "$B/pub/quota-$kind")"
		[ ! -e "$ZR_MNT/pub/quota-$kind" ] || fail "pub/quota-$kind is visible through the mount"
		rm -f "$ZR_TMP/armed"
		make_as_nobody "$kind" || fail "nobody cannot make pub/quota-$kind once chown works"
		[ "$(stat -c %u:%g "$B/pub/quota-$kind")" = "$U:$U" ] ||
			fail "backing pub/quota-$kind is owned by $(stat -c %u:%g "$B/pub/quota-$kind")"
		touch "$ZR_TMP/armed"
		zr_umount
	done
fi
