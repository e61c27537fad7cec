#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# acl: POSIX ACLs behave on zramfs as on tmpfs (the default, acl=on).  One
# scenario runs in the mount and in a tmpfs, and their transcripts must be
# equal: a named user denied by an ACL on a 0644 file cannot read it, one
# granted rw on a 0600 file can write it (and ls shows the '+'), the mask
# follows chmod, a directory's default ACL goes to the files and
# directories made in it (with the umask left out, POSIX.1e), and without
# one the umask applies.  The ACLs are in the backing directory and are
# enforced again after a remount.  With acl=off they are kept but only the
# mode bits are checked (what zramfs did before), and the config file says
# which is in force.  Options that cannot go with acl=on are refused
# (bad_options.sh).
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "the kernel's ACL checks are asked for by the daemon"
zr_need_root "switches to another user and mounts a tmpfs"
zr_need_tool setfacl getfacl setpriv
U=65534

B=$ZR_TMP/backing M=$ZR_TMP/mnt T=$ZR_TMP/tmpfs
mkdir -p "$B" "$M"
chmod 0755 "$ZR_TMP" "$B" "$M"
zr_mount_tmpfs "$T" 16m

as_nobody() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }

# scenario DIR: prints what a user sees of ACLs in DIR (same on any
# filesystem that has them)
scenario() {
	local d=$1
	(
		set +e	# (the denials are part of the transcript)
		cd "$d" || exit 1
		umask 022
		echo secret >denied && chmod 0644 denied
		setfacl -m u:$U:--- denied
		echo "denied: $(getfacl -c denied | tr '\n' ' ')"
		as_nobody cat denied 2>&1 | sed "s|$d|DIR|"
		echo data >granted && chmod 0600 granted
		setfacl -m u:$U:rw granted
		as_nobody sh -c 'echo more >>granted && cat granted' 2>&1
		echo "granted: $(stat -c %A granted) $(ls -l granted | cut -c1-11)"
		chmod 0640 granted
		echo "after chmod 0640: $(getfacl -c granted | tr '\n' ' ')"
		as_nobody sh -c 'echo again >>granted' 2>&1 | sed 's/^.*: //'
		mkdir inherit
		setfacl -d -m u:$U:rwx inherit
		(umask 077 && echo x >inherit/file && mkdir inherit/sub && mkfifo inherit/fifo)
		for f in inherit/file inherit/sub inherit/fifo; do
			echo "$f: $(stat -c %A "$f") $(getfacl -c "$f" | tr '\n' ' ')"
		done
		as_nobody sh -c 'echo y >>inherit/file && cat inherit/file' 2>&1
		(umask 077 && echo z >plain && mkdir plaindir)
		echo "plain: $(stat -c %A plain plaindir | tr '\n' ' ')"
		setfacl -b granted
		echo "granted -b: $(stat -c %A granted) $(getfacl -c granted | tr '\n' ' ')"
	)
}

say "the same ACL scenario on zramfs (acl=on by default) and on tmpfs"
zr_mount "allow_other" "$B" "$M"
M=$ZR_MNT
grep -qx "acl on" "$M/.zramfs/config" || fail "the config does not say 'acl on': $(grep acl "$M/.zramfs/config")"
scenario "$M" >"$ZR_TMP/zramfs.out"
scenario "$T" >"$ZR_TMP/tmpfs.out"
if ! diff -u "$ZR_TMP/tmpfs.out" "$ZR_TMP/zramfs.out" >"$ZR_TMP/diff"; then
	cat "$ZR_TMP/diff" >&2
	fail "ACLs behave differently on zramfs and on tmpfs (diff above: - tmpfs, + zramfs)"
fi
grep -q "Permission denied" "$ZR_TMP/zramfs.out" ||
	fail "the scenario denied nothing: it does not test the checks"
sed 's/^/     /' "$ZR_TMP/zramfs.out"

say "the ACLs are in the backing directory, and enforced after a remount"
zr_umount
getfacl -cn "$B/denied" | grep -qx "user:$U:---" || fail "the backing file has no ACL: $(getfacl -cn "$B/denied")"
zr_mount "allow_other" "$B" "$M"
zr_expect_err "Permission denied" as_nobody cat "$M/denied"
zr_umount

say "acl=off: kept, but only the mode bits are checked"
zr_mount "allow_other,acl=off" "$B" "$M"
grep -qx "acl off" "$M/.zramfs/config" || fail "the config does not say 'acl off'"
[ "$(as_nobody cat "$M/denied")" = secret ] ||
	fail "with acl=off the mode bits (0644) should let nobody read"
getfacl -cn "$M/denied" | grep -qx "user:$U:---" || fail "with acl=off the ACL is not shown"
zr_umount
say "ok"
