#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# acl_unsupported: a backing filesystem without POSIX ACLs: a ramfs (no
# xattrs at all), and an image on a loop device mounted with -o noacl
# (xattrs, but no ACLs): ext4 where the kernel still has that option (Linux
# 6.x took it away), btrfs where mkfs.btrfs (btrfs-progs) is installed.
# With the default options zramfs mounts, turns acl off and says so in its
# log and in .zramfs/config; setfacl in the mount fails with EOPNOTSUPP;
# the mode bits are enforced for another user; new nodes get the caller's
# umask (the kernel applies it: the daemon must not ask for
# FUSE_DONT_MASK); the data written is there after a remount (and, on the
# image, after the image itself is remounted).  Asking for acl=on there is
# a mount error: exit status 1, a message naming acl, nothing mounted.
# Skipped, after the ramfs part, when no image could be mounted -o noacl.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=180
zr_init
zr_need_daemon "checks what the daemon turns off and asks the kernel for"
zr_need_root "mounts a loop device and a ramfs, switches to another user"
zr_need_tool setfacl setpriv losetup mount
U=65534

M=$ZR_TMP/mnt R=$ZR_TMP/ramfs E= IMG=
mkdir -p "$M" "$R"
chmod 0755 "$ZR_TMP" "$M"

as_nobody() { setpriv --reuid=$U --regid=$U --clear-groups -- "$@"; }

# mode PATH WANT WHAT: the permission bits of PATH (octal) are WANT.
mode() {
	local got
	got=$(stat -c %a "$1") || fail "cannot stat $1"
	[ "$got" = "$2" ] || fail "$3: $1 has mode $got, want $2"
}

# The loop device and the image: undone at exit whatever happens (lib.sh
# has unmounted, lazily, what is under $ZR_TMP by then).  LOOP is read
# when the cleanup runs.
LOOP=
ZR_ATEXIT+=('if [ -n "$LOOP" ]; then umount "$E" 2>/dev/null; losetup -d "$LOOP" || echo "cleanup: cannot detach $LOOP" >&2; fi; [ -z "$IMG" ] || rm -f "$IMG"')

# no_mounts: nothing is mounted on $M.
no_mounts() { ! awk -v m="$M" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; }

# refused_acl_on B: `zramfs -o acl=on B M` (daemonizing, as users run it)
# exits 1, says why naming acl, and mounts nothing.
refused_acl_on() {
	local rc=0
	timeout 20 "$ZRAMFS" -o acl=on "$1" "$M" >"$ZR_TMP/out" 2>"$ZR_TMP/err" || rc=$?
	if ! no_mounts; then
		fusermount3 -u "$M" 2>/dev/null || umount -l "$M" 2>/dev/null || true
		fail "'zramfs -o acl=on $1 $M' mounted (exit $rc): $(cat "$ZR_TMP/err")"
	fi
	[ "$rc" = 1 ] || fail "'zramfs -o acl=on $1 $M' exited $rc, want 1: $(cat "$ZR_TMP/err")"
	grep -q "acl=on.*no POSIX ACLs" "$ZR_TMP/err" ||
		fail "'zramfs -o acl=on $1 $M': stderr does not say that acl=on cannot be had: $(cat "$ZR_TMP/err")"
	say "ok: acl=on refused (exit 1): $(grep acl "$ZR_TMP/err")"
}

# check_backing B WHAT: the whole check over the backing directory B.
check_backing() {
	local b=$1 what=$2 f
	say "$what: the backing filesystem itself has no ACLs"
	touch "$b/probe"
	zr_expect_err "Operation not supported" setfacl -m u:$U:r "$b/probe"
	rm "$b/probe"

	say "$what: default options mount, with acl off"
	zr_mount "" "$b" "$M"
	grep -qx "acl off" "$M/.zramfs/config" ||
		fail "$what: the config does not say 'acl off': $(grep "^acl" "$M/.zramfs/config")"
	grep -q "no POSIX ACLs: acl=off" "$ZR_LOG" ||
		fail "$what: the daemon does not log that it turned acl off"
	echo x >"$M/file"
	zr_expect_err "Operation not supported" setfacl -m u:$U:r "$M/file"
	zr_expect_err "Operation not supported" setfacl -d -m u:$U:rx "$M"

	say "$what: the caller's umask applies to new nodes"
	for um in 077:600:700 022:644:755 027:640:750; do
		IFS=: read -r u fm dm <<<"$um"
		(
			umask "$u"
			echo data >"$M/f$u"
			mkdir "$M/d$u"
			mkfifo "$M/p$u"
			: >"$M/d$u/inner"
		) || fail "$what: cannot create nodes with umask $u"
		mode "$M/f$u" "$fm" "$what, umask $u, file"
		mode "$M/p$u" "$fm" "$what, umask $u, fifo"
		mode "$M/d$u/inner" "$fm" "$what, umask $u, file in a new directory"
		mode "$M/d$u" "$dm" "$what, umask $u, directory"
		# the backing filesystem has the same modes
		mode "$b/f$u" "$fm" "$what, umask $u, backing file"
		mode "$b/d$u" "$dm" "$what, umask $u, backing directory"
	done

	say "$what: data written"
	{ head -c 1500000 /dev/urandom; seq 1 200000; } >"$M/data"
	mkdir "$M/sub"
	seq 1 5000 >"$M/sub/text"
	zr_sums "$M" >"$ZR_TMP/sums"
	zr_umount
	zr_same_sums "$ZR_TMP/sums" "$b" "$what, backing directory after the unmount"

	say "$what: remount with allow_other: data, mode bits for user $U"
	zr_mount "allow_other" "$b" "$M"
	grep -qx "acl off" "$M/.zramfs/config" || fail "$what: after the remount the config does not say 'acl off'"
	zr_drop_kcache
	zr_same_sums "$ZR_TMP/sums" "$M" "$what, through the mount after a remount"
	echo secret >"$M/secret" && chmod 0600 "$M/secret"
	echo public >"$M/public" && chmod 0644 "$M/public"
	mkdir "$M/closed" "$M/open" && chmod 0700 "$M/closed" && chmod 0777 "$M/open"
	: >"$M/closed/inside"
	zr_expect_err "Permission denied" as_nobody cat "$M/secret"
	[ "$(as_nobody cat "$M/public")" = public ] || fail "$what: user $U cannot read a 0644 file"
	zr_expect_err "Permission denied" as_nobody sh -c "echo more >>'$M/public'"
	zr_expect_err "Permission denied" as_nobody ls "$M/closed"
	zr_expect_err "Permission denied" as_nobody touch "$M/new"
	chmod 0604 "$M/secret"
	[ "$(as_nobody cat "$M/secret")" = secret ] || fail "$what: user $U cannot read the file after chmod 0604"
	# a user's umask, too
	as_nobody sh -c "umask 027 && echo mine >'$M/open/mine' && mkdir '$M/open/mydir'" ||
		fail "$what: user $U cannot create in a 0777 directory"
	mode "$M/open/mine" 640 "$what, user $U, umask 027, file"
	mode "$M/open/mydir" 750 "$what, user $U, umask 027, directory"
	[ "$(stat -c %u:%g "$M/open/mine")" = "$U:$U" ] ||
		fail "$what: the new file of user $U is owned by $(stat -c %u:%g "$M/open/mine")"
	zr_sums "$M" >"$ZR_TMP/sums"
	zr_umount
	zr_same_sums "$ZR_TMP/sums" "$b" "$what, backing directory after the second unmount"

	say "$what: acl=on is refused"
	refused_acl_on "$b"
	for f in secret public data; do
		[ -f "$b/$f" ] || fail "$what: $b/$f is gone after the refused mount"
	done
}

say "a ramfs: no extended attributes at all"
mount -t ramfs -o mode=0755 ramfs "$R" || fail "cannot mount a ramfs on $R"
check_backing "$R" "ramfs"
umount "$R" || fail "cannot unmount $R"

# loop_case FSTYPE MiB MKFS...: an image of MiB made by MKFS, on a loop
# device, mounted with -o noacl (xattrs, no ACLs), and the check over a
# directory there; afterwards the image itself is remounted, and the data
# must be on it.  Counts the case in NLOOP, or says why not when the kernel
# refuses -o noacl for FSTYPE.  (Not called as a condition: set -e must
# stay in force in it.)
NLOOP=0
loop_case() {
	local fs=$1 mib=$2
	shift 2
	say "$fs: an image mounted with -o noacl"
	if ! command -v "$1" >/dev/null 2>&1; then
		say "$fs: $1 is absent"
		return 0
	fi
	E=$ZR_TMP/$fs IMG=$ZR_TMP/$fs.img
	mkdir -p "$E"
	truncate -s "${mib}M" "$IMG"
	"$@" "$IMG" >"$ZR_TMP/mkfs.log" 2>&1 || { cat "$ZR_TMP/mkfs.log" >&2; fail "$* failed"; }
	LOOP=$(losetup -f --show "$IMG") || fail "cannot attach $IMG to a loop device"
	say "$fs: loop device $LOOP"
	if ! mount -t "$fs" -o noacl "$LOOP" "$E" 2>"$ZR_TMP/mount.err"; then
		say "$fs: this kernel cannot mount it with -o noacl: $(head -n 1 "$ZR_TMP/mount.err") $(dmesg 2>/dev/null | grep -i "$fs" | tail -n 1)"
		losetup -d "$LOOP" || fail "cannot detach $LOOP"
		LOOP=
		rm -f "$IMG"
		return 0
	fi
	mkdir "$E/backing"
	chmod 0755 "$E/backing"
	check_backing "$E/backing" "$fs -o noacl"
	say "$fs -o noacl: the data is on the image"
	umount "$E" || fail "cannot unmount $E"
	mount -t "$fs" -o noacl "$LOOP" "$E" || fail "cannot mount $LOOP again"
	zr_same_sums "$ZR_TMP/sums" "$E/backing" "$fs -o noacl, after the image was remounted"
	[ "$(cat "$E/backing/open/mine")" = mine ] || fail "$fs -o noacl: the file user $U wrote is not on the image"
	umount "$E" || fail "cannot unmount $E"
	losetup -d "$LOOP" || fail "cannot detach $LOOP"
	LOOP=
	rm -f "$IMG"
	NLOOP=$((NLOOP + 1))
}

# Filesystems with xattrs but without ACLs: ext4 had -o noacl until
# Linux 6.x; btrfs still has it.
loop_case ext4 64 mkfs.ext4 -q -F
loop_case btrfs 128 mkfs.btrfs -q -f
[ "$NLOOP" -gt 0 ] ||
	zr_skip "the ramfs part passed, but no filesystem with xattrs and without ACLs could be made (ext4 -o noacl, gone in Linux 6.x; btrfs -o noacl, with mkfs.btrfs of btrfs-progs)"
say "ok"
