// SPDX-License-Identifier: GPL-2.0-or-later
/* zr_renamestat: attribute requests and opens that race renames.
 *
 * Usage: zr_renamestat [-T secs] [-R renamers] [-Q statters] [-n names]
 *                      [-H hogs] DIR
 *
 * Makes DIR/A and DIR/B and in them the names n0..n<names-1> (even ones in
 * A, odd ones in B): every fourth a directory, every fourth a symlink, the
 * rest regular files; and for each renamer r the files A/m<r>.<k> (k < 4).
 * Then, for -T seconds (default 5):
 * - -R renamer processes (default 2) exchange two random names n<i>, n<j>
 *   with RENAME_EXCHANGE (file and file, file and directory, symlink and
 *   either, in one directory or across), and move one of their own files
 *   m<r>.<k> to B/x<r>.<k> and back with plain renames;
 * - -Q statter processes (default 2), each holding an O_PATH descriptor of
 *   every object made above, ask for its attributes with
 *   statx(fd, "", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC), which sends a
 *   GETATTR however fresh the kernel's copy is, and open some of the
 *   regular files through /proc/self/fd (an OPEN with no lookup of a
 *   name); they also statx each name n<i> (which always exists:
 *   exchanges keep the set of names) and open it (O_RDONLY | O_NOFOLLOW:
 *   ELOOP for a symlink);
 * - -H processes (default 0) spin on the CPU, to stretch the windows in
 *   which a rename has been made in the backing directory and the daemon
 *   has not yet recorded the new names. Every process ends after -T
 *   seconds, or when this one dies (PR_SET_PDEATHSIG).
 * None of these objects is ever removed, so every statx and open must
 * succeed: ESTALE and ENOENT are counted as failures (and any other error
 * but ELOOP). Prints the counts; exit status 1 when any failed, 2 for a
 * usage or setup error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "zr_cli.h"

#define PROG "zr_renamestat"
#define MOVERS 4		/* m<r>.<k> files per renamer */
#define MAXPROCS 64

/* What the processes count, shared (MAP_SHARED) and summed at the end. */
struct counts {
	unsigned long renames, stats, opens;
	unsigned long estale, enoent, other;
	unsigned long failed[4];	/* by enum what */
	int last_errno;
	char last_what[64];
};

/* What failed. */
enum what { W_FDSTAT, W_NAMESTAT, W_OPEN, W_REOPEN };
static const char *const what_names[] = { "statx of an fd", "statx of a name", "open of a name",
					   "open of an fd's file" };
#define NWHAT 4

static const char *dir;
static unsigned names = 48, renamers = 2, statters = 2, hogs;
static unsigned secs = 5;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void name_of(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%c/n%u", dir, i % 2 ? 'B' : 'A', i);
}

static void die(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(2);
}

static void count_err(struct counts *c, const char *what, int err)
{
	for (unsigned w = 0; w < NWHAT; w++)
		if (strcmp(what, what_names[w]) == 0)
			c->failed[w]++;
	if (err == ESTALE)
		c->estale++;
	else if (err == ENOENT)
		c->enoent++;
	else
		c->other++;
	c->last_errno = err;
	snprintf(c->last_what, sizeof(c->last_what), "%s", what);
}

static void renamer(unsigned r, struct counts *c, double end)
{
	char a[4096], b[4096];
	unsigned seed = r * 7919u + (unsigned)getpid();

	while (now_s() < end) {
		unsigned i = (unsigned)rand_r(&seed) % names, j = (unsigned)rand_r(&seed) % names;

		if (rand_r(&seed) % 4 == 0) {
			unsigned k = (unsigned)rand_r(&seed) % MOVERS;

			snprintf(a, sizeof(a), "%s/A/m%u.%u", dir, r, k);
			snprintf(b, sizeof(b), "%s/B/x%u.%u", dir, r, k);
			if (rename(a, b) != 0 || rename(b, a) != 0)
				count_err(c, "rename of a mover", errno);
			c->renames += 2;
			continue;
		}
		if (i == j)
			continue;
		name_of(i, a, sizeof(a));
		name_of(j, b, sizeof(b));
		if (renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0)
			count_err(c, "exchange", errno);
		c->renames++;
	}
}

static void statter(unsigned q, struct counts *c, const int *fds, unsigned nfds, double end)
{
	struct statx stx;
	char path[4096];
	unsigned seed = q * 104729u + (unsigned)getpid();

	while (now_s() < end) {
		for (unsigned f = 0; f < nfds; f++) {
			int fd;

			if (statx(fds[f], "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC,
				  STATX_BASIC_STATS, &stx) != 0) {
				count_err(c, "statx of an fd", errno);
				continue;
			}
			c->stats++;
			if (!S_ISREG(stx.stx_mode) || f % 4 != q % 4)
				continue;
			/* an OPEN of the file, without a lookup of its name */
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[f]);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				close(fd);
			else
				count_err(c, "open of an fd's file", errno);
			c->opens++;
		}
		for (unsigned k = 0; k < 8; k++) {
			unsigned i = (unsigned)rand_r(&seed) % names;
			int fd;

			name_of(i, path, sizeof(path));
			if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC,
				  STATX_BASIC_STATS, &stx) != 0)
				count_err(c, "statx of a name", errno);
			c->stats++;
			fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				close(fd);
			else if (errno != ELOOP)
				count_err(c, "open of a name", errno);
			c->opens++;
		}
	}
}

static void hog(double end)
{
	volatile unsigned long x = 0;

	while (now_s() < end)
		for (unsigned i = 0; i < 1000000; i++)
			x += i;
}

static void setup(void)
{
	char path[4096];

	for (const char *d = "AB"; *d; d++) {
		snprintf(path, sizeof(path), "%s/%c", dir, *d);
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			die(path);
	}
	for (unsigned i = 0; i < names; i++) {
		name_of(i, path, sizeof(path));
		if (i % 4 == 0) {
			if (mkdir(path, 0755) != 0)
				die(path);
		} else if (i % 4 == 1) {
			if (symlink("nowhere", path) != 0)
				die(path);
		} else {
			int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

			if (fd < 0 || write(fd, path, strlen(path)) < 0)
				die(path);
			close(fd);
		}
	}
	for (unsigned r = 0; r < renamers; r++) {
		for (unsigned k = 0; k < MOVERS; k++) {
			int fd;

			snprintf(path, sizeof(path), "%s/A/m%u.%u", dir, r, k);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (fd < 0)
				die(path);
			close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	struct counts *counts, sum = { 0 };
	pid_t pids[MAXPROCS];
	unsigned nprocs = 0, nfds = 0;
	int *fds, opt, status, rc = 0;
	char path[4096];
	double end;

	while ((opt = getopt(argc, argv, "T:R:Q:n:H:")) != -1) {
		switch (opt) {
		case 'T': secs = (unsigned)zr_cli_num(PROG, optarg); break;
		case 'R': renamers = (unsigned)zr_cli_num(PROG, optarg); break;
		case 'Q': statters = (unsigned)zr_cli_num(PROG, optarg); break;
		case 'n': names = (unsigned)zr_cli_num(PROG, optarg); break;
		case 'H': hogs = (unsigned)zr_cli_num(PROG, optarg); break;
		default:
			fprintf(stderr, "usage: " PROG " [-T secs] [-R renamers] [-Q statters] [-n names] [-H hogs] DIR\n");
			return 2;
		}
	}
	if (optind != argc - 1 || names < 2 || renamers + statters + hogs > MAXPROCS) {
		fprintf(stderr, PROG ": one DIR, at least 2 names, at most %d processes\n", MAXPROCS);
		return 2;
	}
	dir = argv[optind];
	setup();
	fds = calloc(names + renamers * MOVERS, sizeof(*fds));
	if (!fds)
		die("calloc");
	for (unsigned i = 0; i < names; i++) {
		name_of(i, path, sizeof(path));
		if ((fds[nfds++] = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
			die(path);
	}
	for (unsigned r = 0; r < renamers; r++) {
		for (unsigned k = 0; k < MOVERS; k++) {
			snprintf(path, sizeof(path), "%s/A/m%u.%u", dir, r, k);
			if ((fds[nfds++] = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC)) < 0)
				die(path);
		}
	}
	counts = mmap(NULL, MAXPROCS * sizeof(*counts), PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (counts == MAP_FAILED)
		die("mmap");
	end = now_s() + secs;
	for (unsigned p = 0; p < renamers + statters + hogs; p++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			/* (the hogs too end with us, whatever kills us) */
			if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() == 1)
				_exit(2);
			if (p < renamers)
				renamer(p, &counts[p], end);
			else if (p < renamers + statters)
				statter(p - renamers, &counts[p], fds, nfds, end);
			else
				hog(end);
			_exit(0);
		}
		pids[nprocs++] = pid;
	}
	for (unsigned p = 0; p < nprocs; p++) {
		if (waitpid(pids[p], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0) {
			fprintf(stderr, PROG ": process %u did not end well\n", p);
			rc = 2;
		}
	}
	for (unsigned p = 0; p < nprocs; p++) {
		struct counts *c = &counts[p];

		sum.renames += c->renames;
		sum.stats += c->stats;
		sum.opens += c->opens;
		sum.estale += c->estale;
		sum.enoent += c->enoent;
		sum.other += c->other;
		for (unsigned w = 0; w < NWHAT; w++)
			sum.failed[w] += c->failed[w];
		if (c->last_errno)
			fprintf(stderr, PROG ": process %u: last failure: %s: %s\n", p,
				c->last_what, strerror(c->last_errno));
	}
	printf("%lu renames, %lu statx, %lu opens: %lu ESTALE, %lu ENOENT, %lu other errors\n",
	       sum.renames, sum.stats, sum.opens, sum.estale, sum.enoent, sum.other);
	for (unsigned w = 0; w < NWHAT; w++)
		if (sum.failed[w])
			printf("  %s: %lu failed\n", what_names[w], sum.failed[w]);
	for (unsigned f = 0; f < nfds; f++)
		close(fds[f]);
	free(fds);
	munmap(counts, MAXPROCS * sizeof(*counts));
	if (rc == 0 && (sum.estale || sum.enoent || sum.other))
		rc = 1;
	return rc;
}
