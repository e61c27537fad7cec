#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
# compile_c: a small C project (two sources, a header, a static library made
# with ar) is compiled and linked on the mount, and the program is run from
# the mount (exec maps it).  Compilers and linkers use temporary files,
# rename, mmap and seeks; the output must be right, and again after remount.
. "$(dirname "$0")/lib.sh"
zr_init
CC=${CC:-cc}
zr_need_tool "$CC" ar

B=$ZR_TMP/backing M=$ZR_TMP/mnt
mkdir -p "$B" "$M"
zr_mount "size=32M,block_size=16k" "$B" "$M"
M=$ZR_MNT
mkdir "$M/proj"
cat >"$M/proj/sum.h" <<'C'
unsigned long zr_sum(unsigned long n);
const char *zr_greeting(void);
C
cat >"$M/proj/sum.c" <<'C'
#include "sum.h"
unsigned long zr_sum(unsigned long n)
{
	unsigned long s = 0;
	for (unsigned long i = 1; i <= n; i++)
		s += i * i;
	return s;
}
const char *zr_greeting(void) { return "hello from zramfs"; }
C
cat >"$M/proj/main.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include "sum.h"
static char table[1 << 20] = { 1 };	/* a large data section */
int main(int argc, char **argv)
{
	unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10;
	printf("%s: sum of squares to %lu = %lu (%d)\n", zr_greeting(), n, zr_sum(n), table[0]);
	return 0;
}
C
say "compiling on the mount"
(cd "$M/proj" && "$CC" -O2 -g -c sum.c -o sum.o && ar rcs libsum.a sum.o &&
	"$CC" -O2 -g -o prog main.c -L. -lsum && "$CC" -O0 -save-temps -o prog2 main.c sum.c) ||
	fail "compiling on the mount failed"
expect="hello from zramfs: sum of squares to 1000 = 333833500 (1)"
got=$("$M/proj/prog" 1000) || fail "running prog from the mount failed"
[ "$got" = "$expect" ] || fail "prog printed '$got'"
got=$("$M/proj/prog2" 1000) || fail "running prog2 from the mount failed"
[ "$got" = "$expect" ] || fail "prog2 printed '$got'"
say "ok: $got"
ls "$M/proj/"*main.i "$M/proj/"*main.s >/dev/null || fail "-save-temps files missing"
sha256sum "$M/proj/prog" "$M/proj/libsum.a" | sed "s|$M/||" >"$ZR_TMP/sums"
zr_umount

(cd "$B" && sha256sum -c --quiet "$ZR_TMP/sums") || fail "backing binaries differ"
zr_mount "" "$B" "$M"
M=$ZR_MNT
got=$("$M/proj/prog" 1000) || fail "running prog after remount failed"
[ "$got" = "$expect" ] || fail "prog printed '$got' after remount"
say "relinking after remount"
(cd "$M/proj" && "$CC" -o prog main.c -L. -lsum) || fail "relinking failed"
got=$("$M/proj/prog" 7) || fail "running the relinked prog failed"
[ "$got" = "hello from zramfs: sum of squares to 7 = 140 (1)" ] || fail "relinked prog printed '$got'"
zr_umount
