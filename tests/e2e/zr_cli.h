/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * zr_cli.h: the command-line pieces the test programs zr_fsx, zr_difffuzz
 * and zr_nsstress share. Bad input is a usage error: a line on stderr
 * that starts with the program's name, and exit status 2.
 */
#ifndef ZR_CLI_H
#define ZR_CLI_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * @s as a number: decimal, 0x hex or 0 octal, with an optional k or m
 * suffix (KiB, MiB). @return it; exits 2 when @s is not one. @prog: the
 * program's name, for the message.
 */
static inline uint64_t zr_cli_num(const char *prog, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (errno || *end || end == s) {
		fprintf(stderr, "%s: bad number '%s'\n", prog, s);
		exit(2);
	}
	return v;
}

/*
 * -X name,name...: set @disabled[i] for each operation @names[i] named in
 * @list (which strtok_r cuts up), of the @n there are. A name that is not
 * one of them exits 2, with the list of those there are.
 */
static inline void zr_cli_disable(const char *prog, char *list, const char *const names[],
				  unsigned n, bool disabled[])
{
	char *save = NULL, *name;
	unsigned i;

	for (name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		for (i = 0; i < n && strcmp(name, names[i]) != 0; i++)
			;
		if (i == n) {
			fprintf(stderr, "%s: -X: unknown operation '%s'; they are:", prog, name);
			for (i = 0; i < n; i++)
				fprintf(stderr, " %s", names[i]);
			fputc('\n', stderr);
			exit(2);
		}
		disabled[i] = true;
	}
}

#endif /* ZR_CLI_H */
