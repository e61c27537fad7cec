#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# fd_limit: a daemon started under a low open-file limit (`ulimit -n 1024`,
# the usual soft limit of a shell) fits its fd cache under it. With the
# default max_fds=4096 it once filled its descriptor table: creates failed
# with EMFILE, and at unmount glibc could not load libgcc_s for libfuse's
# pthread_cancel, so the daemon aborted before its final writeback and
# every file written came back empty. Checked: 1100 files written through
# such a mount are all in the backing directory after a clean unmount; a
# soft limit below the hard one is raised to it; an explicit max_fds too
# large for the limit is lowered, with a notice.
. "$(dirname "$0")/lib.sh"
zr_init
zr_need_daemon "sets the daemon's open-file limit"
zr_need_tool prlimit

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
REAL=$ZRAMFS

# wrap LIMITS: ZRAMFS becomes a wrapper that starts the daemon after
# `ulimit LIMITS`
wrap() {
	cat >"$ZR_TMP/wrap" <<SH
#!/bin/sh
ulimit $1 || exit 1
exec "$REAL" "\$@"
SH
	chmod +x "$ZR_TMP/wrap"
	ZRAMFS=$ZR_TMP/wrap
}

say "soft and hard limit 1024, default max_fds: 1100 files"
wrap "-n 1024"
zr_mount "dirty_expire=1h" "$B" "$M"
nofile=$(prlimit --pid "$ZR_PID" --nofile --output SOFT --noheadings | tr -d ' ')
[ "$nofile" = 1024 ] || fail "the daemon's soft limit is $nofile, the wrapper set 1024"
if zr_stats_on; then
	mf=$(zr_config max_fds)
	say "max_fds $mf"
	[ "$mf" -lt 1024 ] || fail "max_fds is $mf under an open-file limit of 1024"
fi
mkdir "$ZR_MNT/d"
for i in $(seq 1100); do
	echo "file $i" >"$ZR_MNT/d/f$i" || fail "writing file $i failed"
done
for i in 1 550 1100; do
	[ "$(cat "$ZR_MNT/d/f$i")" = "file $i" ] || fail "f$i reads back wrong through the mount"
done
zr_umount
bad=0
for i in $(seq 1100); do
	[ "$(cat "$B/d/f$i" 2>/dev/null)" = "file $i" ] || bad=$((bad + 1))
done
[ $bad = 0 ] || fail "$bad of 1100 files are wrong in the backing directory after unmount"

say "soft limit 1024 under a higher hard limit: raised"
hard=$(ulimit -H -n)
if [ "$hard" != unlimited ] && [ "$hard" -gt 1024 ]; then
	wrap "-S -n 1024"
	zr_mount "" "$B" "$M"
	nofile=$(prlimit --pid "$ZR_PID" --nofile --output SOFT --noheadings | tr -d ' ')
	[ "$nofile" = "$hard" ] || fail "the daemon's soft limit is $nofile, its hard limit $hard"
	zr_umount
else
	say "hard limit $hard: nothing to raise, left out"
fi

say "max_fds=1000000 under a limit of 1024: lowered, with a notice"
wrap "-n 1024"
zr_mount "max_fds=1000000" "$B" "$M"
grep -q 'max_fds=1000000 lowered to' "$ZR_LOG" || fail "no notice that max_fds was lowered: $(cat "$ZR_LOG")"
if zr_stats_on; then
	mf=$(zr_config max_fds)
	[ "$mf" -lt 1024 ] || fail "max_fds is $mf under an open-file limit of 1024"
fi
[ "$(cat "$ZR_MNT/d/f7")" = "file 7" ] || fail "f7 reads back wrong after a remount"
zr_umount
say "ok"
