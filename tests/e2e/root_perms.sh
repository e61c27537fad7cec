#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# root_perms: a daemon run by root without allow_other leaves permission
# checks to the backing filesystem (no default_permissions: only root can
# use the mount), and must then answer as root on a local filesystem would:
# access(2) and faccessat(AT_EACCESS) give the same answers as on a plain
# directory for files and directories of every interesting mode (execute
# only with an x bit), a script without an x bit does not run, root
# reads a 0000 file and writes a 0444 one, and other users are kept out.
# With -o default_permissions, or allow_other, the kernel checks again.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "checks root's permissions and keeps another user out"
zr_need_tool python3 setpriv
zr_real || zr_skip "checks the daemon's mount options"

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
chmod 0755 "$ZR_TMP" "$B" "$M" "$R"

# populate DIR: one file and one directory per mode, and two scripts
populate() {
	local d=$1 m
	for m in 0000 0400 0200 0100 0010 0001 0644 0755 4755; do
		echo "#!/bin/sh" >"$d/f$m"
		echo "echo ran" >>"$d/f$m"
		chmod "$m" "$d/f$m"
		mkdir "$d/d$m"
		chmod "$m" "$d/d$m"
	done
}

# answers DIR: access() and faccessat(AT_EACCESS) for R, W, X of each entry
answers() {
	python3 - "$1" <<'EOF'
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    if n == ".zramfs":
        continue
    p = os.path.join(d, n)
    out = []
    for eff in (False, True):
        for bit, c in ((os.R_OK, "r"), (os.W_OK, "w"), (os.X_OK, "x")):
            out.append(c if os.access(p, bit, effective_ids=eff) else "-")
    print(n, "".join(out))
EOF
}

populate "$R"
answers "$R" >"$ZR_TMP/ref.txt"
grep -q '^f0644 rw-rw-$' "$ZR_TMP/ref.txt" ||
	fail "reference: root may execute a 0644 file? ($(grep '^f0644' "$ZR_TMP/ref.txt"))"

check_mount() {
	local what=$1 want_dp=$2
	rm -rf "${B:?}"/*
	zr_mount "$3" "$B" "$M"
	[ "$(zr_config default_permissions)" = "$want_dp" ] ||
		fail "$what: config shows default_permissions '$(zr_config default_permissions)', want $want_dp"
	populate "$ZR_MNT"
	answers "$ZR_MNT" >"$ZR_TMP/zr.txt"
	diff -u "$ZR_TMP/ref.txt" "$ZR_TMP/zr.txt" ||
		fail "$what: access() answers differ from a plain directory's (above)"
	say "$what: a script without an x bit does not run, with one it does"
	zr_expect_err "Permission denied" "$ZR_MNT/f0644"
	[ "$("$ZR_MNT/f0755")" = ran ] || fail "$what: a 0755 script did not run"
	[ "$("$ZR_MNT/f0100")" = ran ] || fail "$what: a 0100 script did not run for root"
	say "$what: root reads a 0000 file, writes a 0444 one, enters a 0000 directory"
	grep -q '^echo ran$' "$ZR_MNT/f0000" || fail "$what: root cannot read a 0000 file"
	chmod 0444 "$ZR_MNT/f0644" && echo more >>"$ZR_MNT/f0644" ||
		fail "$what: root cannot append to a 0444 file"
	(cd "$ZR_MNT/d0000" && touch inside) || fail "$what: root cannot work in a 0000 directory"
	zr_umount
	[ "$(tail -n 1 "$B/f0644")" = more ] || fail "$what: the append did not reach the backing file"
	[ -e "$B/d0000/inside" ] || fail "$what: d0000/inside missing from the backing directory"
}

say "no options: the backing filesystem answers for root"
check_mount "no options" 0 ""

say "another user cannot use the mount without allow_other"
zr_mount "" "$B" "$M"
zr_expect_err "Permission denied" setpriv --reuid=65534 --regid=65534 --clear-groups -- stat "$ZR_MNT/f0755"
zr_umount

say "-o default_permissions: the kernel checks"
check_mount "default_permissions" 1 "default_permissions"

say "allow_other implies default_permissions"
zr_mount "allow_other" "$B" "$M"
[ "$(zr_config default_permissions)" = 1 ] || fail "allow_other: default_permissions is not on"
zr_umount
