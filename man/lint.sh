#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-or-later
# lint.sh - fail on any mandoc -Tlint -Wstyle message about the man pages.
#
# Skipped (77) without mandoc. Two messages depend on the machine, not on the
# pages, and are ignored: "referenced manual not found" (an .Xr to a page
# not installed here, zramfsctl(8) itself before `make install`) and
# "outdated mandoc.db".
mandoc=${MANDOC:-mandoc}
command -v "$mandoc" >/dev/null 2>&1 || { echo "mandoc not found: skipped"; exit 77; }

dir=$(dirname "$0")
status=0
for page in "$dir/zramfs.8" "$dir/zramfsctl.8"; do
	[ -r "$page" ] || { echo "FAIL: cannot read $page"; status=1; continue; }
	out=$(LC_ALL=C "$mandoc" -Tlint -Wstyle "$page" 2>&1 |
	      sed 's/mandoc: /\nmandoc: /g' |
	      grep -v -e '^$' -e 'referenced manual not found' -e 'outdated mandoc\.db')
	if [ -n "$out" ]; then
		printf '%s\n' "$out"
		status=1
	fi
done
[ "$status" -eq 0 ] && echo "man pages lint clean"
exit "$status"
