#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# git: git init/add/commit/log/gc/fsck on the mount.  Git uses rename for
# its lock files, mmap for packs, fsync, hard links and small writes; the
# repository must be consistent (fsck) while mounted and after a remount.
. "$(dirname "$0")/lib.sh"
ZR_TIMEOUT=150
zr_init
zr_need_tool git

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M" "$ZR_TMP/home"
export HOME=$ZR_TMP/home GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_DATE="2024-01-01T00:00:00Z"
export GIT_COMMITTER_DATE="2024-01-01T00:00:00Z"
G=(git -c user.name=zramfs -c user.email=zramfs@example.org -c init.defaultBranch=main
	-c core.fsync=all -c gc.auto=0)
zr_mount "size=16M" "$B" "$M"
M=$ZR_MNT
R=$M/repo

"${G[@]}" init -q "$R" || fail "git init failed"
say "first commit: 300 files"
mkdir -p "$R/src/a" "$R/src/b"
for i in $(seq 1 150); do
	seq "$i" $((i * 20)) >"$R/src/a/f$i.txt"
	head -c $((i * 100)) /dev/urandom | base64 >"$R/src/b/g$i.txt"
done
"${G[@]}" -C "$R" add -A || fail "git add failed"
"${G[@]}" -C "$R" commit -q -m "first" || fail "git commit failed"
say "second commit: changes, a rename and a deletion"
echo changed >>"$R/src/a/f1.txt"
"${G[@]}" -C "$R" mv src/a/f2.txt src/a/renamed.txt || fail "git mv failed"
"${G[@]}" -C "$R" rm -q src/b/g3.txt || fail "git rm failed"
"${G[@]}" -C "$R" commit -q -a -m "second" || fail "second commit failed"
[ "$("${G[@]}" -C "$R" log --oneline | wc -l)" = 2 ] || fail "git log does not show 2 commits"
[ -z "$("${G[@]}" -C "$R" status --porcelain)" ] || fail "worktree not clean after commit"
"${G[@]}" -C "$R" fsck --full --strict 2>&1 || fail "git fsck failed"
head=$("${G[@]}" -C "$R" rev-parse HEAD)
say "git gc (packs, mmap) and fsck again"
"${G[@]}" -C "$R" gc -q --aggressive || fail "git gc failed"
"${G[@]}" -C "$R" fsck --full --strict || fail "git fsck after gc failed"
"${G[@]}" -C "$R" checkout -q HEAD~1 -- src/b/g3.txt || fail "checkout of an old file failed"
[ -f "$R/src/b/g3.txt" ] || fail "g3.txt not restored"
"${G[@]}" -C "$R" reset -q --hard || fail "git reset failed"
zr_umount

zr_mount "size=16M" "$B" "$M"
R=$ZR_MNT/repo
"${G[@]}" -C "$R" fsck --full --strict || fail "git fsck after remount failed"
[ "$("${G[@]}" -C "$R" rev-parse HEAD)" = "$head" ] || fail "HEAD changed across the remount"
[ "$("${G[@]}" -C "$R" log --oneline | wc -l)" = 2 ] || fail "git log after remount wrong"
[ -z "$("${G[@]}" -C "$R" status --porcelain)" ] || fail "worktree not clean after remount"
"${G[@]}" -C "$R" clone -q "$R" "$ZR_MNT/clone" || fail "git clone on the mount failed"
"${G[@]}" -C "$ZR_MNT/clone" fsck --full || fail "fsck of the clone failed"
zr_umount
git -C "$B/repo" fsck --full || fail "git fsck of the backing directory failed"
