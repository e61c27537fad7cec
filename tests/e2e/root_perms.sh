#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# root_perms: by default the kernel checks permissions (default_permissions
# in the mount's options), even for a root daemon without allow_other, so
# that a root process without capabilities is refused what it would be
# refused on a local filesystem. With -o no_default_permissions (a root
# daemon, no allow_other: only root can use the mount) the backing
# filesystem answers, as it answers root: access(2) and
# faccessat(AT_EACCESS) must give the same answers as on a plain directory
# for files and directories of every interesting mode (execute only with an
# x bit), on the mount's root and on an unlinked open file too; a script
# without an x bit must not run; root reads a 0000 file and writes a 0444
# one; other users are kept out.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_root "checks root's permissions and keeps another user out"
zr_need_tool python3 setpriv
zr_real || zr_skip "checks the daemon's mount options"

B=$ZR_TMP/backing M=$ZR_TMP/mnt R=$ZR_TMP/ref
mkdir -p "$B" "$M" "$R"
chmod 0755 "$ZR_TMP" "$B" "$M" "$R"

# populate DIR: one file and one directory per mode (files are scripts)
populate() {
	local d=$1 m
	for m in 0000 0400 0200 0100 0010 0001 0644 0755 4755; do
		echo "#!/bin/sh" >"$d/f$m"
		echo "echo ran" >>"$d/f$m"
		chmod "$m" "$d/f$m"
		mkdir "$d/d$m"
		chmod "$m" "$d/d$m"
	done
	ln -s f0644 "$d/l0644"
}

# answers DIR: access() and faccessat(AT_EACCESS) for R, W, X of DIR itself,
# of each entry, of a symlink not followed, and of an unlinked open file
answers() {
	python3 - "$1" <<'PY'
import os, sys
d = sys.argv[1]
def line(name, p, **kw):
    out = []
    for eff in (False, True):
        for bit, c in ((os.R_OK, "r"), (os.W_OK, "w"), (os.X_OK, "x")):
            out.append(c if os.access(p, bit, effective_ids=eff, **kw) else "-")
    print(name, "".join(out))
line(".", d)
for n in sorted(os.listdir(d)):
    if n != ".zramfs":
        line(n, os.path.join(d, n))
line("l0644-nofollow", os.path.join(d, "l0644"), follow_symlinks=False)
p = os.path.join(d, "gone")
with open(p, "w") as f:
    f.write("x")
os.chmod(p, 0o755)
fd = os.open(p, os.O_RDONLY)
os.unlink(p)
line("unlinked-open", "/proc/self/fd/%d" % fd)
os.close(fd)
PY
}

# capless CMD...: CMD as root without any capability
capless() {
	setpriv --bounding-set=-all --inh-caps=-all -- "$@"
}

populate "$R"
answers "$R" >"$ZR_TMP/ref.txt"
grep -q '^f0644 rw-rw-$' "$ZR_TMP/ref.txt" ||
	fail "reference: root may execute a 0644 file? ($(grep '^f0644' "$ZR_TMP/ref.txt"))"
capless cat "$R/f0000" >/dev/null 2>&1 &&
	fail "reference: a root process without capabilities read a 0000 file"

# mounted_with OPT: whether the kernel has OPT among the mount's options
mounted_with() {
	awk -v m="$ZR_MNT" '$5 == m { print $NF }' /proc/self/mountinfo | tr ',' '\n' | grep -qx "$1"
}

check_mount() {
	local what=$1 want_dp=$2
	rm -rf "${B:?}"/*
	zr_mount "$3" "$B" "$M"
	[ "$(zr_config default_permissions)" = "$want_dp" ] ||
		fail "$what: config shows default_permissions '$(zr_config default_permissions)', want $want_dp"
	if [ "$want_dp" = 1 ]; then
		mounted_with default_permissions || fail "$what: the kernel does not check permissions (mountinfo)"
	else
		! mounted_with default_permissions || fail "$what: default_permissions in mountinfo"
	fi
	populate "$ZR_MNT"
	answers "$ZR_MNT" >"$ZR_TMP/zr.txt"
	diff -u "$ZR_TMP/ref.txt" "$ZR_TMP/zr.txt" ||
		fail "$what: access() answers differ from a plain directory's (above)"
	say "$what: a script without an x bit does not run, with one it does"
	zr_expect_err "Permission denied" "$ZR_MNT/f0644"
	[ "$("$ZR_MNT/f0755")" = ran ] || fail "$what: a 0755 script did not run"
	[ "$("$ZR_MNT/f0100")" = ran ] || fail "$what: a 0100 script did not run for root"
	say "$what: root reads a 0000 file, writes a 0444 one, enters a 0000 directory and the root"
	grep -q '^echo ran$' "$ZR_MNT/f0000" || fail "$what: root cannot read a 0000 file"
	chmod 0444 "$ZR_MNT/f0644" && echo more >>"$ZR_MNT/f0644" ||
		fail "$what: root cannot append to a 0444 file"
	(cd "$ZR_MNT/d0000" && touch inside) || fail "$what: root cannot work in a 0000 directory"
	(cd "$ZR_MNT" && ls >/dev/null) || fail "$what: cannot cd into the mount"
	if [ "$want_dp" = 1 ]; then
		say "$what: a root process without capabilities is refused a 0000 file"
		capless cat "$ZR_MNT/f0000" >/dev/null 2>&1 &&
			fail "$what: a root process without capabilities read a 0000 file"
	fi
	zr_umount
	[ "$(tail -n 1 "$B/f0644")" = more ] || fail "$what: the append did not reach the backing file"
	[ -e "$B/d0000/inside" ] || fail "$what: d0000/inside missing from the backing directory"
}

say "default: the kernel checks"
check_mount "default" 1 ""

say "another user cannot use the mount without allow_other"
zr_mount "" "$B" "$M"
zr_expect_err "Permission denied" setpriv --reuid=65534 --regid=65534 --clear-groups -- stat "$ZR_MNT/f0755"
zr_umount

say "-o no_default_permissions: the backing filesystem answers for root"
check_mount "no_default_permissions" 0 "no_default_permissions"

# refused_as WHO SETPRIV-ARGS...: the daemon started through setpriv with
# no_default_permissions must refuse, mount nothing and say why
refused_as() {
	local who=$1 rc=0
	shift
	setpriv "$@" -- "$ZRAMFS" -o no_default_permissions "$B" "$M" \
		>"$ZR_TMP/out" 2>"$ZR_TMP/err" || rc=$?
	if zr_is_mounted "$M"; then
		fusermount3 -u "$M" 2>/dev/null || umount "$M"
		fail "$who: the daemon mounted with no_default_permissions"
	fi
	[ "$rc" != 0 ] || fail "$who: the daemon accepted no_default_permissions"
	grep -q "no_default_permissions needs a daemon run by root" "$ZR_TMP/err" ||
		fail "$who: no message naming the problem: $(cat "$ZR_TMP/err")"
	say "ok: $who refused"
}
say "no_default_permissions needs a root daemon: real and effective uid 0"
refused_as "a non-root daemon" --reuid=65534 --regid=65534 --clear-groups
# libfuse mounts for the real uid: that user would get in unchecked
refused_as "a daemon with real uid 65534, effective uid 0" --ruid=65534
