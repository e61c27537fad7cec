#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# tmp_multiuser: zramfs as /tmp on a multi-user machine (the README's
# fstab line: allow_other, a 1777 directory) behaves as a tmpfs does.
# tmp_multiuser.py runs the same scenarios as root, with users A (nobody),
# B, C (bare ids, no accounts) and group G, in a zramfs mount and in a
# tmpfs, and the transcripts must be equal:
#   main       the sticky bit (unlink, rename, rmdir, RENAME_EXCHANGE of
#              another user's file, symlink, FIFO, directory: refused; its
#              owner, root and the directory's owner may), the hard link
#              rule of fs.protected_hardlinks, mkstemp, mkdtemp, mktemp(1),
#              two users racing O_CREAT|O_EXCL for 300 names (exactly one
#              wins each), O_TMPFILE, AF_UNIX stream and datagram sockets
#              of one user used by another (ls -l shows type s), a FIFO
#              between two users, fcntl F_SETLK/F_OFD_SETLK and flock
#              between two processes (EAGAIN, F_GETLK names the holder,
#              released at close), modes and umask, setgid directories,
#              inotify events of another user's operations;
#   protected  the fs.protected_regular/fifos/symlinks checks of open(2)
#              in sticky directories, for another user, root and the owner;
#   plant      the same O_CREAT opens of files that A made in the backing
#              directory after the victims had looked the names up through
#              the mount (the README's backing directory is 1777 too): the
#              kernel, holding a negative entry, sends a CREATE of a name
#              that is taken. The daemon used to open what it found
#              itself: EACCES for A, the owner, where the daemon (root)
#              met protected_regular/_fifos/_symlinks in the backing
#              directory against itself; EIO for a FIFO, ELOOP for a
#              symlink the kernel follows. It now answers ESTALE and the
#              kernel looks again and opens it itself.
# protected and plant run with the sysctls as they are and, if they are
# not at Debian's values (protected_regular=2, protected_fifos=1,
# protected_symlinks=1), once more with those: this test sets them for
# the few seconds of those runs and puts the old values back (also on any
# exit), since they are global and cannot be set for one namespace.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "switches to other users and mounts a tmpfs"
zr_need_tool mktemp flock ls
# (as another user, python3 may be a shim in root's home: use the system's)
PY=/usr/bin/python3
[ -x "$PY" ] || zr_skip "$PY is absent"
SCEN=${TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/tests/e2e/tmp_multiuser.py

B=$ZR_TMP/backing M=$ZR_TMP/mnt T=$ZR_TMP/tmpfs
mkdir -p "$B" "$M"
# the other users must reach the mounts and the backing directory
chmod 0755 "$ZR_TMP" "$B" "$M"
zr_mount_tmpfs "$T" 64m
chmod 1777 "$T"
zr_mount "allow_other,size=64m" "$B" "$M"
M=$ZR_MNT
chmod 1777 "$M"

# run PART TAG: the scenario PART in a new directory TAG of the mount and
# of the tmpfs; the transcripts must be equal. plant makes the other
# user's files in the backing directory (in the tmpfs itself for the
# reference). The zramfs transcript is left in $ZR_TMP/TAG.zr.
run() {
	local part=$1 tag=$2 rc=0
	mkdir "$M/$tag" "$T/$tag"
	chmod 0755 "$M/$tag" "$T/$tag"
	say "$part ($tag): on the tmpfs and on zramfs"
	if [ "$part" = plant ]; then
		"$PY" "$SCEN" plant "$T/$tag" "$T/$tag" >"$ZR_TMP/$tag.tmpfs" 2>&1 || rc=$?
		[ $rc = 0 ] || { cat "$ZR_TMP/$tag.tmpfs" >&2; fail "$part failed on the tmpfs (exit $rc)"; }
		if ! zr_real; then
			cp "$ZR_TMP/$tag.tmpfs" "$ZR_TMP/$tag.zr"
			return 0
		fi
		"$PY" "$SCEN" plant "$M/$tag" "$B/$tag" >"$ZR_TMP/$tag.zr" 2>&1 || rc=$?
	else
		"$PY" "$SCEN" "$part" "$T/$tag" >"$ZR_TMP/$tag.tmpfs" 2>&1 || rc=$?
		[ $rc = 0 ] || { cat "$ZR_TMP/$tag.tmpfs" >&2; fail "$part failed on the tmpfs (exit $rc)"; }
		"$PY" "$SCEN" "$part" "$M/$tag" >"$ZR_TMP/$tag.zr" 2>&1 || rc=$?
	fi
	[ $rc = 0 ] || { cat "$ZR_TMP/$tag.zr" >&2; fail "$part failed on zramfs (exit $rc)"; }
	if ! diff -u "$ZR_TMP/$tag.tmpfs" "$ZR_TMP/$tag.zr" >"$ZR_TMP/$tag.diff"; then
		cat "$ZR_TMP/$tag.diff" >&2
		fail "$part ($tag): zramfs differs from tmpfs (diff above: - tmpfs, + zramfs)"
	fi
	say "ok: $(wc -l <"$ZR_TMP/$tag.zr") lines, the same"
}

# has TAG LINE...: the zramfs transcript TAG holds each LINE (so that a
# scenario that did nothing on both cannot pass)
has() {
	local tag=$1 l
	shift
	for l in "$@"; do
		grep -qxF -- "$l" "$ZR_TMP/$tag.zr" ||
			fail "$tag: no line '$l' in the transcript: $(cat "$ZR_TMP/$tag.zr")"
	done
}

run main main
has main \
	"B: unlink a_file: EPERM" "B: rename a_file -> b_new: EPERM" \
	"B: unlink a_link: EPERM" "B: unlink a_to_b: EPERM" "B: rmdir a_dir: EPERM" \
	"B: rename b_file over a_file: EPERM" "B: RENAME_EXCHANGE b_file a_file: EPERM" \
	"A: unlink b_link: EPERM" "A: unlink a_link: ok" "root: unlink b_link: ok" \
	"C: unlink a_file: ok" "C: unlink a_link: ok" \
	"B: read A's temporary files and directories: EACCES EACCES EACCES EACCES" \
	"  names won by both or neither, or owned by the loser: 0; all 300 made: True" \
	"  ls -l shows type 's'" "  B: connect, send, receive: pong" \
	"  server: unlinked exists False" "  server: got hello" \
	"B: read the FIFO while A writes: 1000 lines, last 'line 999'" \
	"  B: fcntl F_SETLK while A holds 0+100: EAGAIN, beyond: got it, getlk: write 0+100 pid holder" \
	"  B: fcntl F_OFD_SETLK while A holds 0+100: EAGAIN, beyond: got it, getlk: write 0+100 pid -1" \
	"  B: fcntl F_SETLK after: got it, beyond: got it, getlk: unlocked" \
	"B: flock LOCK_EX|LOCK_NB while A holds LOCK_EX: EAGAIN" \
	"B: flock LOCK_EX|LOCK_NB after A closed: ok" \
	"B: read a_secret: EACCES" \
	"A: umask 027: file dir fifo socket: -rw-r----- A:65534 drwxr-x--- A:65534 prw-r----- A:65534 srwxr-x--- A:65534" \
	"A: create in sg (A in G): -rw-rw-r-- A:4210" "A: mkdir in sg: drwxrwsr-x A:4210" \
	"  CREATE f" "  MOVED_TO g cookie#1" "  DELETE g" "  DELETE|ISDIR sub"

# sysctls: fs.protected_regular, _fifos and _symlinks, as "R F S"
sysctls() {
	echo "$(cat /proc/sys/fs/protected_regular) $(cat /proc/sys/fs/protected_fifos)" \
		"$(cat /proc/sys/fs/protected_symlinks)"
}
# set_sysctls R F S
set_sysctls() {
	echo "$1" >/proc/sys/fs/protected_regular &&
		echo "$2" >/proc/sys/fs/protected_fifos &&
		echo "$3" >/proc/sys/fs/protected_symlinks
}
run protected prot0
run plant plant0
has plant0 "B: open gw/p O_RDONLY|O_NONBLOCK|O_CREAT: ok" "A: open ad/l O_RDONLY|O_CREAT: ok"
OLD=$(sysctls) P='' PL=''
if [ "$OLD" = "2 1 1" ]; then
	P=prot0 PL=plant0
else
	say "fs.protected_regular, _fifos, _symlinks are $OLD: set to 2 1 1 for a moment"
	ZR_ATEXIT+=("set_sysctls $OLD")
	if set_sysctls 2 1 1 2>/dev/null; then
		set +e
		(
			set -e
			run protected prot1
			run plant plant1
		)
		rc=$?
		# shellcheck disable=SC2086
		set_sysctls $OLD || fail "cannot put fs.protected_* back to $OLD"
		set -e
		say "fs.protected_* put back to $(sysctls)"
		[ $rc = 0 ] || exit $rc
		P=prot1 PL=plant1
	else
		# shellcheck disable=SC2086
		set_sysctls $OLD 2>/dev/null || true
		say "SKIP the checks with Debian's values: cannot set fs.protected_*"
	fi
fi
if [ -n "$P" ]; then
	for t in "$P" "$PL"; do
		has "$t" "B: open pr/f O_WRONLY|O_CREAT: EACCES" "root: open pr/f O_WRONLY|O_CREAT: EACCES" \
			"A: open pr/f O_WRONLY|O_CREAT: ok" \
			"B: open pr/p O_RDONLY|O_NONBLOCK|O_CREAT: EACCES" "A: open pr/p O_RDONLY|O_NONBLOCK|O_CREAT: ok" \
			"B: open pr/l O_RDONLY|O_CREAT (A's symlink to root's file): EACCES" \
			"A: open pr/l O_RDONLY|O_CREAT (A's symlink to root's file): ok" \
			"B: open gw/f O_WRONLY|O_CREAT: EACCES" "B: open ad/f O_WRONLY|O_CREAT: ok" \
			"B: open cd/r O_WRONLY|O_CREAT (root's file, C's directory): EACCES" \
			"root: open cd/r O_WRONLY|O_CREAT (root's file, C's directory): ok"
	done
	has "$P" "B: read pr/l (A's symlink): EACCES" "A: read pr/l (A's symlink): target"
fi

zr_umount
say "ok"
