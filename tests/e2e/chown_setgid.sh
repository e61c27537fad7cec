#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# chown_setgid: a chown or chgrp clears set-id bits as Linux does on a
# local filesystem (the same operations on a plain directory are the
# reference).  Set-user-ID always goes; set-group-ID goes when the file is
# group-executable, or when the caller is not in the file's group and has
# no CAP_FSETID: a chgrp by root of a set-group-ID, not group-executable
# file of a group root is not in keeps the bit (zramfs cleared it: the
# kernel asks the daemon to clear set-id bits on every chown, and the
# daemon did not look at the caller's capabilities; zr_difffuzz found it).
# A chown(-1, -1) of a FIFO clears S_ISUID, and S_ISGID when
# group-executable.
# (allow_other: the user 1000 reaches the mount.)
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "changes owners and groups, and chgrps as another user"
zr_need_tool setpriv

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
chmod 0755 "$ZR_TMP" "$B" "$M" "$R"

# cases DIR: make the files in DIR, chown them, print "name mode owner"
cases() {
	local d=$1 f
	# root, group 65534 (root is not in it), set-group-ID not group-executable
	f=$d/root_chgrp; touch "$f"; chown 0:65534 "$f"; chmod 2644 "$f"; chgrp 1001 "$f"
	f=$d/root_chown; touch "$f"; chown 0:65534 "$f"; chmod 2644 "$f"; chown 1000 "$f"
	f=$d/root_chown_same; touch "$f"; chown 0:65534 "$f"; chmod 2644 "$f"; chown 0:65534 "$f"
	f=$d/root_suid; touch "$f"; chown 0:65534 "$f"; chmod 6644 "$f"; chgrp 1001 "$f"
	# group-executable: set-group-ID goes for root too
	f=$d/root_gx; touch "$f"; chown 0:65534 "$f"; chmod 2754 "$f"; chgrp 1001 "$f"
	# root's own group
	f=$d/root_own; touch "$f"; chmod 2644 "$f"; chgrp 1001 "$f"
	# the owner, not in group 65534, without CAP_FSETID: set-group-ID goes
	f=$d/user_chgrp; touch "$f"; chown 1000:65534 "$f"; chmod 2644 "$f"
	setpriv --reuid 1000 --regid 1000 --clear-groups chgrp 1000 "$f"
	# the owner in the file's group: it stays
	f=$d/user_in_group; touch "$f"; chown 1000:1000 "$f"; chmod 2644 "$f"
	setpriv --reuid 1000 --regid 1000 --clear-groups chgrp 1000 "$f"
	# chown(-1, -1) of FIFOs: the kernel sends the daemon a SETATTR that
	# asks for nothing (zramfs kept the bits; helper-70's fuzzer)
	f=$d/fifo_suid; mkfifo "$f"; chmod 5665 "$f"; chown : "$f"
	f=$d/fifo_gx; mkfifo "$f"; chmod 2775 "$f"; chown : "$f"
	for f in root_chgrp root_chown root_chown_same root_suid root_gx root_own user_chgrp user_in_group \
		fifo_suid fifo_gx; do
		stat -c '%n %a %u:%g' "$d/$f" | sed "s|^$d/||"
	done
}

cases "$R" >"$ZR_TMP/want"
zr_mount "allow_other" "$B" "$M"
cases "$ZR_MNT" >"$ZR_TMP/got"
zr_umount
zr_mount "allow_other" "$B" "$M"
cases_again=$(cd "$ZR_MNT" && for f in $(cut -d' ' -f1 "$ZR_TMP/want"); do stat -c '%n %a %u:%g' "$f"; done)
zr_umount
if ! diff -u "$ZR_TMP/want" "$ZR_TMP/got" >&2; then
	fail "set-id bits after chown differ from a plain directory's (- plain, + zramfs)"
fi
if ! diff -u "$ZR_TMP/want" - <<<"$cases_again" >&2; then
	fail "set-id bits after chown differ after a remount (- plain, + zramfs)"
fi
say "ok: $(tr '\n' ' ' <"$ZR_TMP/got")"
