// SPDX-License-Identifier: GPL-2.0-or-later
/* zramfsctl.c - list zramfs mounts, print their statistics, send control commands.
 *
 * The daemon exports everything through a hidden directory ".zramfs" at the
 * mount root: "stats" and "config" are "name value" lines, "control" takes
 * one command per write. This tool only reads and writes those files; it
 * finds the mounts in /proc/self/mountinfo (fstype "fuse.zramfs"). For the
 * tests, the undocumented variable ZRAMFSCTL_MOUNTINFO names another file
 * to read the mount table from.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "zr_util.h"

#define ZR_FSTYPE "fuse.zramfs"
#define ZR_CTLDIR ".zramfs"

/* Exit statuses. */
enum { EXIT_OK = 0, EXIT_ERR = 1, EXIT_USAGE = 2 };

/* One "name value" line of stats or config. */
struct zr_kv {
	char *name;  /* first word of the line */
	char *value; /* rest of the line, without the newline */
};

/* The lines of one file, in file order. */
struct zr_kvlist {
	struct zr_kv *v; /* array of n entries */
	size_t n;        /* entries used */
};

/* One zramfs mount with what its control files said. */
struct zr_mount {
	char *mnt;               /* mount point, unescaped */
	char *source;            /* mountinfo source (the backing directory) */
	struct zr_kvlist stats;  /* .zramfs/stats */
	struct zr_kvlist config; /* .zramfs/config */
};

/* Command-line flags. */
static bool opt_json;  /* --json */
static bool opt_bytes; /* --bytes */
static bool opt_stats; /* --stats */
static bool opt_lazy;  /* --lazy (umount) */
/* --timeout: how long a mount may take to answer a read of stats or config, ms (0: no limit) */
static int opt_timeout_ms = 10000;
static bool opt_timeout_set; /* --timeout given */

static void die_oom(void)
{
	fputs("zramfsctl: out of memory\n", stderr);
	exit(EXIT_ERR);
}

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	if (!p)
		die_oom();
	return p;
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n);
	if (!p)
		die_oom();
	return p;
}

/* Destructor of a kvlist filled by read_kv(); accepts an empty list. */
static void kv_free(struct zr_kvlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].value);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/*
 * Child side of read_file(): copy @path to @out.
 * @return 0, or the errno of the failed call (an exit status: errnos fit).
 */
static int copy_file(const char *path, int out)
{
	char buf[8192];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf)), w;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : 0;

			if (close(fd) < 0 && !err)
				err = errno;
			return err;
		}
		for (ssize_t off = 0; off < n; off += w) {
			w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				w = 0;
			else if (w < 0)
				return errno;
		}
	}
}

/**
 * read_file() - the contents of @path, read by a child process so that a
 * mount whose daemon does not answer (stopped, hung) cannot hang the tool:
 * after opt_timeout_ms the child is killed and not waited for (when the
 * daemon has already taken its request, the child stays until the daemon
 * answers or dies).
 * @return the length, with *@out set (NUL-terminated, free with free()),
 *         -ETIMEDOUT, or -errno of the child's open or read.
 */
static ssize_t read_file(const char *path, char **out)
{
	uint64_t deadline = zr_now_ms() + (uint64_t)opt_timeout_ms;
	size_t len = 0, cap = 0;
	char *buf = NULL;
	ssize_t rc = 1;
	int p[2], st;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		/* A child stuck in the daemon must not hold our caller's pipes
		 * (as in $(zramfsctl)) open after we exit. */
		int null = open("/dev/null", O_RDWR);

		for (int i = 0; i < 3 && null >= 0; i++)
			dup2(null, i);
		_exit(copy_file(path, p[1]));
	}
	close(p[1]);
	if (pid < 0) {
		rc = -errno;
		close(p[0]);
		return rc;
	}
	while (rc > 0) {
		int wait_ms = -1, n;
		uint64_t now;

		if (cap - len < 4096) {
			cap = cap ? 2 * cap : 8192;
			buf = xrealloc(buf, cap);
		}
		if (opt_timeout_ms > 0) {
			now = zr_now_ms();
			if (now >= deadline) {
				rc = -ETIMEDOUT;
				break;
			}
			wait_ms = (int)(deadline - now);
		}
		n = poll(&(struct pollfd){ .fd = p[0], .events = POLLIN }, 1, wait_ms);
		if (n <= 0) {
			if (n < 0 && errno != EINTR)
				rc = -errno;
			continue;	/* (0: the loop sees the deadline) */
		}
		rc = read(p[0], buf + len, cap - len - 1);
		if (rc < 0 && errno == EINTR)
			rc = 1;
		else if (rc < 0)
			rc = -errno;
		else
			len += (size_t)rc;
	}
	close(p[0]);
	if (rc < 0) {		/* reap the child if it dies at once, never block */
		kill(pid, SIGKILL);
		for (int i = 0; i < 10 && waitpid(pid, &st, WNOHANG) == 0; i++)
			usleep(10000);
		free(buf);
		return rc;
	}
	/* end of file: the child has exited or is exiting */
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR) {
			st = EIO << 8;	/* (reaped elsewhere: cannot tell) */
			break;
		}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		free(buf);
		return WIFEXITED(st) ? -WEXITSTATUS(st) : -EIO;
	}
	buf[len] = '\0';
	*out = buf;
	return (ssize_t)len;
}

/**
 * read_kv() - read "name value" lines of @path into @l (freed with kv_free()),
 * through read_file(). Blank lines are skipped; a line without a value gets "".
 * @return 0, -ETIMEDOUT, or -errno when the file cannot be read.
 */
static int read_kv(const char *path, struct zr_kvlist *l)
{
	char *buf = NULL, *line, *next;
	ssize_t len = read_file(path, &buf);

	if (len < 0)
		return (int)len;
	for (line = buf; line < buf + len; line = next) {
		char *end = memchr(line, '\n', (size_t)(buf + len - line)), *sp;

		if (!end)
			end = buf + len;
		next = end + 1;
		while (end > line && end[-1] == '\r')
			end--;
		*end = '\0';
		if (end == line)
			continue;
		sp = strchr(line, ' ');
		if (sp)
			*sp++ = '\0';
		l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
		l->v[l->n].name = xstrdup(line);
		l->v[l->n].value = xstrdup(sp ? sp : "");
		l->n++;
	}
	free(buf);
	return 0;
}

/* The value of @name in @l, or NULL. */
static const char *kv_get(const struct zr_kvlist *l, const char *name)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].name, name) == 0)
			return l->v[i].value;
	return NULL;
}

/* The unsigned value of @name in @l; false when absent or not a number. */
static bool kv_u64(const struct zr_kvlist *l, const char *name, uint64_t *out)
{
	const char *s = kv_get(l, name);
	char *end;

	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/* Destructor of the array built by read_mounts(); accepts NULL. */
static void mounts_free(struct zr_mount *m, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(m[i].mnt);
		free(m[i].source);
		kv_free(&m[i].stats);
		kv_free(&m[i].config);
	}
	free(m);
}

/**
 * read_mounts() - every mount of the mount table, in table order.
 * @all: when false, only the zramfs ones.
 * @zr: set to the fstype match of each entry (array of *@n, freed by caller),
 *      or NULL when @all is false.
 * Line format: "id parent maj:min root MOUNTPOINT opts [optional...] - FSTYPE SOURCE superopts".
 * @return 0 with *@out (free with mounts_free()) and *@n set, or -errno.
 */
static int read_mounts(bool all, struct zr_mount **out, bool **zr, size_t *n)
{
	const char *path = getenv("ZRAMFSCTL_MOUNTINFO");
	char *line = NULL;
	size_t cap = 0;
	struct zr_mount *m = NULL;
	bool *is_zr = NULL;
	size_t cnt = 0;
	FILE *f;

	if (!path || !*path)
		path = "/proc/self/mountinfo";
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (getline(&line, &cap, f) >= 0) {
		char *field[64], *save = NULL, *tok;
		size_t nf = 0, sep = 0;

		for (tok = strtok_r(line, " \n", &save); tok && nf < ZR_ARRAY_SIZE(field);
		     tok = strtok_r(NULL, " \n", &save))
			field[nf++] = tok;
		for (size_t i = 6; i < nf; i++) {
			if (strcmp(field[i], "-") == 0) {
				sep = i;
				break;
			}
		}
		if (sep == 0 || sep + 2 >= nf)
			continue; /* not a mountinfo line */
		bool match = strcmp(field[sep + 1], ZR_FSTYPE) == 0;
		if (!all && !match)
			continue;
		m = xrealloc(m, (cnt + 1) * sizeof(*m));
		is_zr = xrealloc(is_zr, (cnt + 1) * sizeof(*is_zr));
		memset(&m[cnt], 0, sizeof(*m));
		m[cnt].mnt = xstrdup(field[4]);
		m[cnt].source = xstrdup(field[sep + 2]);
		zr_unescape_octal(m[cnt].mnt);
		zr_unescape_octal(m[cnt].source);
		is_zr[cnt] = match;
		cnt++;
	}
	free(line);
	fclose(f);
	*out = m;
	*n = cnt;
	if (zr)
		*zr = is_zr;
	else
		free(is_zr);
	return 0;
}

/* Index of the last entry of @m (the visible one) mounted at @path, or SIZE_MAX. */
static size_t last_at(const struct zr_mount *m, size_t n, const char *path)
{
	size_t found = SIZE_MAX;

	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].mnt, path) == 0)
			found = i;
	return found;
}

/**
 * find_mount() - the zramfs mount whose mount point is @arg.
 * The last entry of the table at that path is the visible one; it must be
 * a zramfs mount. An absolute @arg is looked up as written first, and
 * resolved only when that fails: resolving stats the mount point, which
 * hangs when the daemon does not answer. Prints the problem itself.
 * @return 0 with *@out filled (mnt and source only), or -1.
 */
static int find_mount(const char *arg, struct zr_mount *out)
{
	size_t n, len = strlen(arg), found = SIZE_MAX;
	char *path = xstrdup(arg), *canon;
	struct zr_mount *m;
	int rp_errno = 0;
	bool *zr;
	int rc;

	rc = read_mounts(true, &m, &zr, &n);
	if (rc < 0) {
		fprintf(stderr, "zramfsctl: cannot read the mount table: %s\n", strerror(-rc));
		free(path);
		return -1;
	}
	while (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';
	if (path[0] == '/')
		found = last_at(m, n, path);
	if (found == SIZE_MAX) {
		canon = realpath(arg, NULL);
		if (canon) {
			found = last_at(m, n, canon);
			free(canon);
		} else {
			rp_errno = errno;
		}
	}
	if (found != SIZE_MAX && zr[found]) {
		out->mnt = m[found].mnt;
		out->source = m[found].source;
		m[found].mnt = m[found].source = NULL;
		rc = 0;
	} else if (found == SIZE_MAX && rp_errno && access(arg, F_OK) != 0) {
		fprintf(stderr, "zramfsctl: %s: %s\n", arg, strerror(rp_errno));
		rc = -1;
	} else {
		fprintf(stderr, "zramfsctl: not a zramfs mount: %s\n", arg);
		rc = -1;
	}
	mounts_free(m, n);
	free(zr);
	free(path);
	return rc;
}

/* Path of @file in the control directory of @mnt (free with free()). */
static char *ctl_path(const char *mnt, const char *file)
{
	char *p;

	if (asprintf(&p, "%s/" ZR_CTLDIR "/%s", mnt, file) < 0)
		die_oom();
	return p;
}

/* Whether @mnt is (still) a zramfs mount in the mount table. */
static bool still_mounted(const char *mnt)
{
	struct zr_mount *m;
	bool found = false;
	size_t n;

	if (read_mounts(false, &m, NULL, &n) < 0)
		return true;	/* cannot tell: report the failure */
	for (size_t i = 0; i < n && !found; i++)
		found = strcmp(m[i].mnt, mnt) == 0;
	mounts_free(m, n);
	return found;
}

/**
 * load_mount() - read stats and config of @m. Prints the problem itself,
 * but when @gone_ok (every mount is listed) a mount that was unmounted
 * since the mount table was read is just left out.
 * @return 0, -1, or -2 for a mount gone when @gone_ok.
 */
static int load_mount(struct zr_mount *m, bool gone_ok)
{
	static const char *const files[] = { "stats", "config" };
	struct zr_kvlist *dst[] = { &m->stats, &m->config };

	for (size_t i = 0; i < ZR_ARRAY_SIZE(files); i++) {
		char *p = ctl_path(m->mnt, files[i]);
		int rc = read_kv(p, dst[i]);

		if (rc == -ENOENT && gone_ok && !still_mounted(m->mnt)) {
			free(p);
			return -2;
		}
		if (rc == -ETIMEDOUT) {
			fprintf(stderr, "zramfsctl: %s: no answer in %g s (is its daemon stopped or stuck?)\n",
				m->mnt, opt_timeout_ms / 1000.0);
			free(p);
			return -1;
		}
		if (rc < 0) {
			fprintf(stderr, "zramfsctl: cannot read %s: %s\n", p, strerror(-rc));
			free(p);
			return -1;
		}
		free(p);
	}
	return 0;
}

/* True for the statistics that count bytes (the others count events or blocks). */
static bool is_byte_stat(const char *name)
{
	size_t len = strlen(name);

	return strncmp(name, "bytes_", 6) == 0 || strcmp(name, "budget") == 0 ||
	       strncmp(name, "mem_used_", 9) == 0 || strcmp(name, "written_around") == 0 ||
	       strcmp(name, "removed_dropped") == 0 ||
	       (len > 5 && strcmp(name + len - 5, "_size") == 0) ||
	       (len > 6 && strcmp(name + len - 6, "_bytes") == 0);
}

/* Format a byte count as --bytes asks into @buf. @return @buf. */
static char *fmt_size(uint64_t v, char *buf, size_t len)
{
	if (opt_bytes)
		snprintf(buf, len, "%" PRIu64, v);
	else
		zr_human_size(v, buf, len);
	return buf;
}

/* --- output: table ----------------------------------------------------- */

enum { COL_MNT, COL_BACKING, COL_ALGO, COL_BLKSZ, COL_SIZE, COL_DATA, COL_COMPR,
       COL_TOTAL, COL_RATIO, COL_DIRTY, NCOLS };

static const char *const col_name[NCOLS] = {
	"MOUNTPOINT", "BACKING", "ALGORITHM", "BLKSZ", "SIZE", "DATA", "COMPR",
	"TOTAL", "RATIO", "DIRTY",
};

/* A stat or config number formatted as a size, "-" when the daemon did not give it. */
static char *cell_size(const struct zr_kvlist *l, const char *name)
{
	char buf[32];
	uint64_t v;

	return xstrdup(kv_u64(l, name, &v) ? fmt_size(v, buf, sizeof(buf)) : "-");
}

/* Fill the cells of one table row for @m (each cell freed by the caller). */
static void table_row(const struct zr_mount *m, char *cell[NCOLS])
{
	const char *backing = kv_get(&m->config, "backing");
	const char *comp = kv_get(&m->config, "comp");
	const char *cold = kv_get(&m->config, "cold_comp");
	uint64_t orig, compr, dirty, bs;
	char buf[64];

	cell[COL_MNT] = xstrdup(m->mnt);
	cell[COL_BACKING] = xstrdup(backing ? backing : m->source);
	snprintf(buf, sizeof(buf), "%s/%s", comp ? comp : "-", cold ? cold : "-");
	cell[COL_ALGO] = xstrdup(buf);
	cell[COL_BLKSZ] = cell_size(&m->config, "block_size");
	cell[COL_SIZE] = cell_size(&m->stats, "budget");
	cell[COL_DATA] = cell_size(&m->stats, "orig_data_size");
	cell[COL_COMPR] = cell_size(&m->stats, "compr_data_size");
	cell[COL_TOTAL] = cell_size(&m->stats, "mem_used_total");
	if (kv_u64(&m->stats, "orig_data_size", &orig) &&
	    kv_u64(&m->stats, "compr_data_size", &compr) && compr > 0)
		snprintf(buf, sizeof(buf), "%.2f", (double)orig / (double)compr);
	else
		snprintf(buf, sizeof(buf), "-");
	cell[COL_RATIO] = xstrdup(buf);
	if (kv_u64(&m->stats, "blocks_dirty", &dirty) &&
	    kv_u64(&m->config, "block_size", &bs))
		cell[COL_DIRTY] = xstrdup(fmt_size(dirty * bs, buf, sizeof(buf)));
	else
		cell[COL_DIRTY] = xstrdup("-");
}

/* Print @n mounts as a zramctl-like table: text columns left, numbers right. */
static void print_table(const struct zr_mount *m, size_t n)
{
	char *(*rows)[NCOLS] = calloc(n ? n : 1, sizeof(*rows));
	int width[NCOLS];

	if (!rows)
		die_oom();
	for (int c = 0; c < NCOLS; c++)
		width[c] = (int)strlen(col_name[c]);
	for (size_t r = 0; r < n; r++) {
		table_row(&m[r], rows[r]);
		for (int c = 0; c < NCOLS; c++)
			width[c] = ZR_MAX(width[c], (int)strlen(rows[r][c]));
	}
	for (size_t r = 0; r <= n; r++) {
		for (int c = 0; c < NCOLS; c++) {
			const char *s = r == 0 ? col_name[c] : rows[r - 1][c];
			bool left = c <= COL_ALGO;

			if (c == NCOLS - 1)
				printf("%*s", width[c], s); /* a number: no trailing blanks */
			else
				printf(left ? "%-*s " : "%*s ", width[c], s);
		}
		putchar('\n');
	}
	for (size_t r = 0; r < n; r++)
		for (int c = 0; c < NCOLS; c++)
			free(rows[r][c]);
	free(rows);
}

/* --stats: one statistic a line, name, value and (for bytes) human value. */
static void print_stats(const struct zr_mount *m)
{
	for (size_t i = 0; i < m->stats.n; i++) {
		const struct zr_kv *kv = &m->stats.v[i];
		char buf[32];
		uint64_t v;

		if (!opt_bytes && is_byte_stat(kv->name) && kv_u64(&m->stats, kv->name, &v))
			printf("%-22s %20s  %s\n", kv->name, kv->value,
			       zr_human_size(v, buf, sizeof(buf)));
		else
			printf("%-22s %20s\n", kv->name, kv->value);
	}
}

/* --- output: JSON ------------------------------------------------------ */

/* Length of the valid UTF-8 sequence at @s, or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4;
	else
		return 0;
	if (s[0] == 0xe0) lo = 0xa0;  /* overlong */
	if (s[0] == 0xed) hi = 0x9f;  /* surrogates */
	if (s[0] == 0xf0) lo = 0x90;  /* overlong */
	if (s[0] == 0xf4) hi = 0x8f;  /* above U+10FFFF */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* Print @s as a JSON string; bytes that are not UTF-8 become U+FFFD. */
static void json_string(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		size_t len = utf8_len(p);

		if (*p == '"' || *p == '\\')
			printf("\\%c", *p);
		else if (*p < 0x20)
			printf("\\u%04x", *p);
		else if (len == 0)
			fputs("\\ufffd", stdout);
		else
			fwrite(p, 1, len, stdout);
		p += len ? len : 1;
	}
	putchar('"');
}

/* True when @s is a JSON integer: -?(0|[1-9][0-9]*). */
static bool is_json_int(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		return s[1] == '\0';
	if (*s < '1' || *s > '9')
		return false;
	while (*s >= '0' && *s <= '9')
		s++;
	return *s == '\0';
}

/* Print one "name": value member; integers as numbers, the rest as strings. */
static void json_member(const char *name, const char *value, bool *first)
{
	printf("%s\n    ", *first ? "" : ",");
	*first = false;
	json_string(name);
	fputs(": ", stdout);
	if (is_json_int(value))
		fputs(value, stdout);
	else
		json_string(value);
}

/* Print @n mounts as a JSON list of flat objects: mountpoint, config, stats, ratio. */
static void print_json(const struct zr_mount *m, size_t n)
{
	putchar('[');
	for (size_t i = 0; i < n; i++) {
		uint64_t orig, compr;
		bool first = true;
		char buf[32];

		printf("%s\n  {", i ? "," : "");
		json_member("mountpoint", m[i].mnt, &first);
		for (size_t k = 0; k < m[i].config.n; k++)
			json_member(m[i].config.v[k].name, m[i].config.v[k].value, &first);
		for (size_t k = 0; k < m[i].stats.n; k++)
			if (!kv_get(&m[i].config, m[i].stats.v[k].name))
				json_member(m[i].stats.v[k].name, m[i].stats.v[k].value, &first);
		if (kv_u64(&m[i].stats, "orig_data_size", &orig) &&
		    kv_u64(&m[i].stats, "compr_data_size", &compr) && compr > 0)
			snprintf(buf, sizeof(buf), "%.2f", (double)orig / (double)compr);
		else
			snprintf(buf, sizeof(buf), "null");
		printf(",\n    \"ratio\": %s\n  }", buf);
	}
	printf("%s]\n", n ? "\n" : "");
}

/* --- commands ---------------------------------------------------------- */

/**
 * send_command() - write @cmd (and a newline, as echo does) to the control
 * file of @mnt in one write. Prints the problem itself.
 * @return 0 or -errno.
 */
static int send_command(const char *mnt, const char *cmd)
{
	char *path = ctl_path(mnt, "control");
	char *line;
	int fd, err = 0;
	ssize_t w;

	if (asprintf(&line, "%s\n", cmd) < 0)
		die_oom();
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		fprintf(stderr, "zramfsctl: cannot open %s: %s\n", path, strerror(err));
		free(path);
		free(line);
		return -err;
	}
	w = write(fd, line, strlen(line));
	if (w < 0)
		err = errno;
	else if ((size_t)w != strlen(line))
		err = EIO;
	if (close(fd) < 0 && !err)
		err = errno;
	if (err)
		fprintf(stderr, "zramfsctl: %s: '%s' failed: %s%s\n", mnt, cmd, strerror(err),
			err == ENOSPC && strncmp(cmd, "size=", 5) == 0 ?
			" (below what the tier's tables hold for good; the daemon's log says how much is needed)" : "");
	free(path);
	free(line);
	return -err;
}

/* Check one "name=value" of `set`; prints the problem. @return true if valid. */
static bool valid_setting(const char *arg)
{
	const char *eq = strchr(arg, '=');
	uint64_t v;

	if (eq && strncmp(arg, "size=", 5) == 0) {
		/* (the daemon takes 1 MiB or more) */
		if (zr_parse_size(eq + 1, zr_ram_bytes(), &v) == 0 && v >= 1024 * 1024)
			return true;
		fprintf(stderr, "zramfsctl: bad size '%s' (1m or more: bytes with k/m/g/t suffix, or N%% of RAM)\n",
			eq + 1);
	} else if (eq && strncmp(arg, "dirty_expire=", 13) == 0) {
		if (zr_parse_duration_ms(eq + 1, &v) == 0)
			return true;
		fprintf(stderr, "zramfsctl: bad duration '%s' (e.g. 500ms, 30s, 2m)\n", eq + 1);
	} else {
		fprintf(stderr, "zramfsctl: cannot set '%s' (settable: size=, dirty_expire=)\n",
			arg);
	}
	return false;
}

static void usage(FILE *out)
{
	fputs("Usage: zramfsctl [--json] [--bytes] [--timeout T] [MOUNTPOINT...]\n"
	      "       zramfsctl --stats [--json] [--bytes] [--timeout T] MOUNTPOINT\n"
	      "       zramfsctl writeback MOUNTPOINT [all|idle|raw]\n"
	      "       zramfsctl drop-clean MOUNTPOINT\n"
	      "       zramfsctl compact MOUNTPOINT\n"
	      "       zramfsctl set MOUNTPOINT size=SIZE|dirty_expire=DURATION...\n"
	      "       zramfsctl umount [--lazy] MOUNTPOINT\n"
	      "\n"
	      "Without a mount point, list every zramfs mount.\n"
	      "\n"
	      "Options:\n"
	      "  -s, --stats     print every statistic of one mount, one a line\n"
	      "  -l, --lazy      umount: detach at once, do not wait for the daemon\n"
	      "  -j, --json      print a JSON list of objects (every stat and setting)\n"
	      "  -b, --bytes     print sizes in bytes instead of 1.5G style\n"
	      "  -t, --timeout T skip (and report) a mount that does not answer in T\n"
	      "                  seconds, or e.g. 500ms (default 10; 0: wait for ever)\n"
	      "  -h, --help      print this help and exit\n"
	      "  -V, --version   print the version and exit\n"
	      "\n"
	      "Commands (written to MOUNTPOINT/.zramfs/control):\n"
	      "  writeback   write dirty blocks back to the backing directory:\n"
	      "              all (default), idle (not accessed lately), raw (incompressible)\n"
	      "  drop-clean  drop every clean block from RAM\n"
	      "  compact     compact the compressed pool\n"
	      "  set         change size= (RAM budget) or dirty_expire= on the fly\n"
	      "  umount      write everything back, unmount, and wait for the daemon to\n"
	      "              exit (umount(8) returns before it has)\n"
	      "\n"
	      "Exit status: 0 ok, 1 error, 2 usage error. See zramfsctl(8).\n", out);
}

/* Run a control subcommand: args[0] is the command word. @return exit status. */
static int run_command(int argc, char **args)
{
	const char *cmd = args[0];
	struct zr_mount m = { 0 };
	int rc = EXIT_OK;

	if (opt_json || opt_bytes || opt_stats || opt_timeout_set) {
		fprintf(stderr, "zramfsctl: %s takes no --json, --bytes, --stats or --timeout\n",
			cmd);
		return EXIT_USAGE;
	}
	if (argc < 2) {
		fprintf(stderr, "zramfsctl: %s: missing MOUNTPOINT\n", cmd);
		return EXIT_USAGE;
	}
	if (strcmp(cmd, "writeback") == 0) {
		const char *what = argc > 2 ? args[2] : "all";

		if (argc > 3 ||
		    (strcmp(what, "all") && strcmp(what, "idle") && strcmp(what, "raw"))) {
			fprintf(stderr, "zramfsctl: writeback takes all, idle or raw\n");
			return EXIT_USAGE;
		}
	} else if (strcmp(cmd, "set") == 0) {
		if (argc < 3) {
			fputs("zramfsctl: set: missing size=SIZE or dirty_expire=DURATION\n",
			      stderr);
			return EXIT_USAGE;
		}
		for (int i = 2; i < argc; i++)
			if (!valid_setting(args[i]))
				return EXIT_USAGE;
	} else if (argc > 2) {
		fprintf(stderr, "zramfsctl: %s takes only a MOUNTPOINT\n", cmd);
		return EXIT_USAGE;
	}
	if (find_mount(args[1], &m) < 0)
		return EXIT_ERR;
	if (strcmp(cmd, "writeback") == 0) {
		char buf[32];

		snprintf(buf, sizeof(buf), "writeback %s", argc > 2 ? args[2] : "all");
		rc = send_command(m.mnt, buf) ? EXIT_ERR : EXIT_OK;
	} else if (strcmp(cmd, "set") == 0) {
		for (int i = 2; i < argc && rc == EXIT_OK; i++)
			rc = send_command(m.mnt, args[i]) ? EXIT_ERR : EXIT_OK;
	} else {
		rc = send_command(m.mnt, strcmp(cmd, "drop-clean") == 0 ? "drop_clean" : cmd)
			? EXIT_ERR : EXIT_OK;
	}
	free(m.mnt);
	free(m.source);
	return rc;
}

/*
 * Unmount @mnt as the user who mounted it, through fusermount3 (umount(2)
 * needs CAP_SYS_ADMIN; fusermount3 is set-user-ID root and unmounts the
 * FUSE mounts of the user who runs it). @lazy: fusermount3 -z. fusermount3
 * prints its own errors. @return 0, or -1 when it failed or did not run.
 */
static int fusermount_unmount(const char *mnt, bool lazy)
{
	int status;
	pid_t pid;

	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "zramfsctl: cannot run fusermount3: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", "--", mnt, (char *)NULL);
		fprintf(stderr, "zramfsctl: cannot run fusermount3: %s\n", strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/*
 * umount waits as long as the daemon needs to answer, but a daemon that is
 * stopped (SIGSTOP, a debugger) or hung kept it silent for ever
 * (helper-66). A watch thread says so once after UMOUNT_NOTICE_MS, and
 * what can be done; the wait goes on. Fields under umount_watch.lock.
 */
#define UMOUNT_NOTICE_MS 5000

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* on CLOCK_MONOTONIC; signalled at the end */
	bool done;		/* the daemon answered: no word */
	const char *mnt;
	const char *what;	/* what we wait for */
	pid_t pid;		/* the daemon's, 0 while not known */
} umount_watch = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Whether process @pid is stopped or traced (state T or t in its stat). */
static bool pid_stopped(pid_t pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');	/* (the command name may hold anything) */
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

static void *umount_watch_main(void *arg)
{
	struct timespec until;

	(void)arg;
	zr_deadline(&until, CLOCK_MONOTONIC, UMOUNT_NOTICE_MS * 1000000ull);
	pthread_mutex_lock(&umount_watch.lock);
	while (!umount_watch.done &&
	       pthread_cond_timedwait(&umount_watch.cond, &umount_watch.lock, &until) != ETIMEDOUT)
		;
	if (!umount_watch.done) {
		pid_t pid = umount_watch.pid;

		if (pid > 0 && pid_stopped(pid))
			fprintf(stderr, "zramfsctl: %s: the daemon (pid %d) is stopped, and %s waits for it: `kill -CONT %d` lets it go on; Ctrl-C gives up and leaves the mount as it is\n",
				umount_watch.mnt, (int)pid, umount_watch.what, (int)pid);
		else
			fprintf(stderr, "zramfsctl: %s: the daemon%s has not answered %s for %d s (still writing back, stopped or hung?): waiting; Ctrl-C gives up and leaves the mount as it is\n",
				umount_watch.mnt, pid > 0 ? "" : " (pid not known yet)", umount_watch.what,
				UMOUNT_NOTICE_MS / 1000);
	}
	pthread_mutex_unlock(&umount_watch.lock);
	return NULL;
}

/* Say what umount waits for now (@what is a static string); @pid when
 * it has become known, else 0. */
static void umount_watch_step(const char *what, pid_t pid)
{
	pthread_mutex_lock(&umount_watch.lock);
	umount_watch.what = what;
	if (pid > 0)
		umount_watch.pid = pid;
	pthread_mutex_unlock(&umount_watch.lock);
}

/* Start watching the daemon of @mnt. @return true when the thread runs
 * (umount_watch_end() must then be called), false when it could not start
 * (umount then works, silently, as before). */
static bool umount_watch_begin(const char *mnt)
{
	pthread_t tid;

	zr_cond_init_monotonic(&umount_watch.cond);
	umount_watch.mnt = mnt;
	umount_watch.what = "its statfs";
	if (pthread_create(&tid, NULL, umount_watch_main, NULL) != 0)
		return false;
	pthread_detach(tid);
	return true;
}

/* The daemon has answered everything umount asked of it. */
static void umount_watch_end(void)
{
	pthread_mutex_lock(&umount_watch.lock);
	umount_watch.done = true;
	pthread_cond_signal(&umount_watch.cond);
	pthread_mutex_unlock(&umount_watch.lock);
}

/* do_umount(): @mnt refused us its control file, or the mount itself. */
static void no_entry(const char *mnt)
{
	if (geteuid() == 0)
		/* FUSE lets no other user in, root included, without
		 * allow_other or allow_root */
		fprintf(stderr, "zramfsctl: %s: not unmounted: the mount lets in only the user who mounted it (no allow_other or allow_root): run this as that user, or unmount with --lazy (what the daemon holds is then written back after the unmount, while nothing waits for it)\n",
			mnt);
	else
		fprintf(stderr, "zramfsctl: %s: not unmounted: only its owner or root may write it back and unmount it\n",
			mnt);
}

/*
 * Unmount @mnt and wait until its daemon has exited, so that everything is
 * in the backing directory when we return: umount(2) of a FUSE mount returns
 * at once, and the daemon writes back what it holds after that. First the
 * kernel's cached writes go to the daemon (syncfs) and the daemon writes
 * back every dirty block (the `writeback all` control command): when that
 * fails (the backing filesystem is full, read-only...), nothing is unmounted
 * and the data stays in RAM, where it can still be read or copied. @lazy:
 * detach at once (MNT_DETACH) and do not wait: the daemon stays until the
 * mount's last user goes. A user who is not root unmounts through
 * fusermount3. A mount whose daemon is gone (ENOTCONN) is unmounted without
 * either: what it held is lost already. @return exit status.
 */
static int do_umount(const char *arg, bool lazy)
{
	struct zr_mount m = { 0 };
	struct zr_kvlist stats = { 0 };
	uint64_t pid = 0;
	struct statfs sfs;
	struct statvfs svfs;
	char *path;
	int fd, n, pidfd = -1, rc = EXIT_ERR, e;
	bool told = false, watching;

	if (find_mount(arg, &m) < 0)
		return EXIT_ERR;
	watching = umount_watch_begin(m.mnt);
	/* (statfs always asks the daemon; a stat may be answered from the
	 * kernel's cache of a dead mount's attributes. With --lazy nothing
	 * is asked of the daemon: it may be the one that hangs.) */
	if (!lazy && statfs(m.mnt, &sfs) < 0 && errno == ENOTCONN) {
		fprintf(stderr, "zramfsctl: %s: the mount has lost its daemon (%s): what the daemon had not written back cannot be reached through it; unmounting\n",
			m.mnt, strerror(ENOTCONN));
		lazy = true;	/* nothing to write back, no daemon to wait for */
	}
	if (!lazy) {
		umount_watch_step("a read of its stats", 0);
		path = ctl_path(m.mnt, "stats");
		opt_timeout_ms = 0;	/* as long as the commands below may wait */
		e = -read_kv(path, &stats);
		free(path);
		if (e == EACCES || e == EPERM) {
			no_entry(m.mnt);
			goto out;
		}
		if (e == 0 && kv_u64(&stats, "pid", &pid) && pid > 0)
			pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
		kv_free(&stats);
		if (pidfd < 0)	/* (an older daemon gives no pid) */
			fprintf(stderr, "zramfsctl: %s: the daemon's pid is not known: not waiting for it to exit\n",
				m.mnt);
		umount_watch_step("the flush of the kernel's cached writes (syncfs)",
				  pidfd >= 0 ? (pid_t)pid : 0);
		fd = open(m.mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0) {
			(void)syncfs(fd);
			close(fd);
		}
		umount_watch_step("the command 'writeback all'", 0);
		/* a read-only mount (-o ro) holds nothing to write back, and
		 * its control file cannot be opened for writing (helper-72) */
		e = statvfs(m.mnt, &svfs) == 0 && (svfs.f_flag & ST_RDONLY) ? 0 :
			-send_command(m.mnt, "writeback all");
		if (e) {
			if (e == EACCES || e == EPERM)
				no_entry(m.mnt);
			else
				fprintf(stderr, "zramfsctl: %s: not unmounted: its dirty data stays in RAM until it can be written back\n",
					m.mnt);
			goto out;
		}
	}
	if (watching) {
		umount_watch_end();
		watching = false;
	}
	if (umount2(m.mnt, lazy ? MNT_DETACH : 0) < 0) {
		e = errno;
		if (e != EPERM || geteuid() == 0) {
			fprintf(stderr, "zramfsctl: cannot unmount %s: %s\n", m.mnt, strerror(e));
			goto out;
		}
		if (fusermount_unmount(m.mnt, lazy) < 0) {
			/* (its own message says why; umount2's EPERM only
			 * said that we are not root: helper-66) */
			fprintf(stderr, "zramfsctl: cannot unmount %s: fusermount3 failed\n", m.mnt);
			goto out;
		}
	}
	rc = EXIT_OK;
	if (lazy || pidfd < 0)
		goto out;
	/* the pidfd names that very process: no confusion with a reused pid */
	while ((n = poll(&(struct pollfd){ .fd = pidfd, .events = POLLIN }, 1,
			 told ? -1 : 5000)) == 0 || (n < 0 && errno == EINTR)) {
		if (n == 0 && pid_stopped((pid_t)pid)) {
			fprintf(stderr, "zramfsctl: %s is unmounted; its daemon (pid %llu) is stopped before the end of its writeback: `kill -CONT %llu` lets it finish\n",
				m.mnt, (unsigned long long)pid, (unsigned long long)pid);
			told = true;
		} else if (n == 0) {
			fprintf(stderr, "zramfsctl: waiting for the daemon of %s (pid %llu) to finish writing back\n",
				m.mnt, (unsigned long long)pid);
			told = true;
		}
	}
out:
	if (watching)
		umount_watch_end();
	if (pidfd >= 0)
		close(pidfd);
	free(m.mnt);
	free(m.source);
	return rc;
}

/* Show the mounts named in @args (every zramfs mount when @argc is 0).
 * @return EXIT_OK, EXIT_USAGE for a bad command line, or EXIT_ERR when a
 * mount could not be found or read (the others are still shown). */
static int run_show(int argc, char **args)
{
	struct zr_mount *m = NULL;
	size_t n = 0, shown = 0;
	int status = EXIT_OK;

	if (opt_stats && argc != 1) {
		fputs("zramfsctl: --stats takes exactly one MOUNTPOINT\n", stderr);
		return EXIT_USAGE;
	}
	if (argc == 0) {
		int rc = read_mounts(false, &m, NULL, &n);

		if (rc < 0) {
			fprintf(stderr, "zramfsctl: cannot read the mount table: %s\n",
				strerror(-rc));
			return EXIT_ERR;
		}
	} else {
		m = calloc((size_t)argc, sizeof(*m));
		if (!m)
			die_oom();
		for (int i = 0; i < argc; i++) {
			if (find_mount(args[i], &m[n]) < 0)
				status = EXIT_ERR;
			else
				n++;
		}
	}
	/* Keep the mounts that answer; a failing one is reported and skipped. */
	for (size_t i = 0; i < n; i++) {
		int rc = load_mount(&m[i], argc == 0);

		if (rc < 0) {
			if (rc == -1)
				status = EXIT_ERR;
			continue;
		}
		if (shown != i) {
			struct zr_mount tmp = m[shown];

			m[shown] = m[i];
			m[i] = tmp;
		}
		shown++;
	}
	if (opt_json)
		print_json(m, shown);
	else if (opt_stats && shown == 1)
		print_stats(&m[0]);
	else if (!opt_stats && shown > 0)
		print_table(m, shown);
	mounts_free(m, n);
	return status;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "bytes", no_argument, NULL, 'b' },
		{ "stats", no_argument, NULL, 's' },
		{ "lazy", no_argument, NULL, 'l' },
		{ "timeout", required_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	/* (drop_clean: the control file's spelling, taken too) */
	static const char *const commands[] = { "writeback", "drop-clean", "drop_clean", "compact", "set" };
	uint64_t ms;
	int c, status;

	/* read_file() waits for its children: they must not be reaped for us */
	signal(SIGCHLD, SIG_DFL);

	while ((c = getopt_long(argc, argv, "jbslt:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (zr_parse_duration_ms(optarg, &ms) != 0) {
				fprintf(stderr, "zramfsctl: bad timeout '%s' (seconds, or e.g. 500ms; 0 waits for ever)\n",
					optarg);
				return EXIT_USAGE;
			}
			if (ms > INT_MAX) {
				fprintf(stderr, "zramfsctl: timeout '%s' too long (at most %d s)\n",
					optarg, INT_MAX / 1000);
				return EXIT_USAGE;
			}
			/* (under 1 ms is not "for ever") */
			opt_timeout_ms = ms == 0 && strtold(optarg, NULL) != 0 ? 1 : (int)ms;
			opt_timeout_set = true;
			break;
		case 'l': opt_lazy = true; break;
		case 'j': opt_json = true; break;
		case 'b': opt_bytes = true; break;
		case 's': opt_stats = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		case 'V': printf("zramfsctl %s\n", VERSION); return EXIT_OK;
		default:
			fputs("Try 'zramfsctl --help'.\n", stderr);
			return EXIT_USAGE;
		}
	}
	if (optind < argc && strcmp(argv[optind], "umount") == 0) {
		if (opt_json || opt_bytes || opt_stats || opt_timeout_set) {
			fputs("zramfsctl: umount takes no --json, --bytes, --stats or --timeout\n",
			      stderr);
			return EXIT_USAGE;
		}
		if (optind + 2 != argc) {
			fputs("zramfsctl: umount takes one MOUNTPOINT\n", stderr);
			return EXIT_USAGE;
		}
		return do_umount(argv[optind + 1], opt_lazy);
	}
	if (opt_lazy) {
		fputs("zramfsctl: --lazy goes with umount only\n", stderr);
		return EXIT_USAGE;
	}
	if (optind < argc)
		for (size_t i = 0; i < ZR_ARRAY_SIZE(commands); i++)
			if (strcmp(argv[optind], commands[i]) == 0)
				return run_command(argc - optind, argv + optind);
	status = run_show(argc - optind, argv + optind);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "zramfsctl: cannot write the output: %s\n", strerror(errno));
		return EXIT_ERR;
	}
	return status;
}
