// SPDX-License-Identifier: GPL-2.0-or-later
/* util.c - clocks, size/duration parsing and logging shared by every part. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "zr_util.h"

uint64_t zr_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void zr_deadline(struct timespec *ts, clockid_t clk, uint64_t ns)
{
	uint64_t nsec;

	clock_gettime(clk, ts);
	nsec = (uint64_t)ts->tv_nsec + ns % 1000000000u;
	ts->tv_sec += (time_t)(ns / 1000000000u + nsec / 1000000000u);
	ts->tv_nsec = (long)(nsec % 1000000000u);
}

void zr_cond_init_monotonic(pthread_cond_t *cond)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &ca);
	pthread_condattr_destroy(&ca);
}

uint64_t zr_now_ms(void)
{
	return zr_now_ns() / 1000000ull;
}

bool zr_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int ma, mi;

	if (uname(&u) != 0 || sscanf(u.release, "%d.%d", &ma, &mi) != 2)
		return false;
	return ma > major || (ma == major && mi >= minor);
}

/* Whether the comma-separated @list (changed) names controller @ctrl. */
static bool has_controller(char *list, const char *ctrl)
{
	char *save = NULL;

	for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
		if (strcmp(t, ctrl) == 0)
			return true;
	return false;
}

/*
 * The path of this process's cgroup, from /proc/self/cgroup, into @out: in
 * the v1 hierarchy of controller @ctrl, or in the v2 one when @ctrl is "".
 * @return 0 or -ENOENT.
 */
static int own_cgroup(const char *ctrl, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096];
	int rc = -ENOENT;

	if (!f)
		return -ENOENT;
	while (rc && fgets(line, sizeof(line), f)) {
		char *ctrls = strchr(line, ':'), *path;

		if (!ctrls)
			continue;
		*ctrls++ = '\0';
		path = strchr(ctrls, ':');
		if (!path)
			continue;
		*path++ = '\0';
		path[strcspn(path, "\n")] = '\0';
		if (*ctrl ? has_controller(ctrls, ctrl)
			  : strcmp(line, "0") == 0 && *ctrls == '\0') {
			snprintf(out, len, "%s", path);
			rc = 0;
		}
	}
	fclose(f);
	return rc;
}

/* The first number after @key in file @path, or UINT64_MAX ("max", none). */
static uint64_t read_limit(const char *path, const char *key)
{
	FILE *f = fopen(path, "re");
	char line[256];
	uint64_t v = UINT64_MAX;
	size_t klen = strlen(key);

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, klen) == 0) {
			char *e;
			unsigned long long n = strtoull(line + klen, &e, 10);

			if (e != line + klen)
				v = n;
			break;
		}
	}
	fclose(f);
	return v;
}

/* One level of the memory cgroup tree, for for_each_level()'s callback. */
struct cg_level {
	const char *dir;	/* its directory under /sys/fs/cgroup */
	bool v2;		/* in the unified hierarchy */
};

/*
 * Call @fn for this process's memory cgroup and each of its ancestors, up
 * to the root of the hierarchy as mounted (v1's memory controller, else
 * v2). The path in /proc/self/cgroup is relative to the root of the cgroup
 * namespace, which is what /sys/fs/cgroup shows; where that path is not
 * there (v1 without a cgroup namespace, as in containers on v1 hosts: the
 * mount is the container's own cgroup) the top directory stands for ours.
 */
static void for_each_level(void (*fn)(const struct cg_level *lv, void *arg), void *arg)
{
	char cg[2048], dir[4096];
	struct cg_level lv = { .dir = dir };
	const char *base;

	if (own_cgroup("memory", cg, sizeof(cg)) == 0) {
		base = "/sys/fs/cgroup/memory";
	} else if (own_cgroup("", cg, sizeof(cg)) == 0) {
		base = "/sys/fs/cgroup";
		lv.v2 = true;
	} else {
		return;
	}
	snprintf(dir, sizeof(dir), "%s%s", base, strcmp(cg, "/") == 0 ? "" : cg);
	if (access(dir, F_OK) != 0) {
		lv.dir = base;
		fn(&lv, arg);
		return;
	}
	for (;;) {
		char *slash = strrchr(cg, '/');

		fn(&lv, arg);
		if (!slash || strcmp(cg, "/") == 0)
			break;
		slash[slash == cg ? 1 : 0] = '\0';	/* the parent; "/" last */
		snprintf(dir, sizeof(dir), "%s%s", base, strcmp(cg, "/") == 0 ? "" : cg);
	}
}

/* The limit of one level, UINT64_MAX when none (v1 says "unlimited" with a
 * page-rounded LLONG_MAX; v2 "max", and the root has no file). */
static uint64_t level_limit(const struct cg_level *lv)
{
	char path[4200];
	uint64_t v;

	snprintf(path, sizeof(path), "%s/%s", lv->dir,
		 lv->v2 ? "memory.max" : "memory.limit_in_bytes");
	v = read_limit(path, "");
	return v >= (1ull << 62) ? UINT64_MAX : v;
}

static void min_limit(const struct cg_level *lv, void *arg)
{
	uint64_t *lim = arg;

	*lim = ZR_MIN(*lim, level_limit(lv));
}

uint64_t zr_mem_limit(void)
{
	uint64_t lim = UINT64_MAX;

	for_each_level(min_limit, &lim);
	return lim;
}

struct headroom {
	uint64_t room, scale;
};

/* Headroom at one limited level: its limit less what it uses that reclaim
 * cannot take back (usage less page cache; shmem is on the anon lists). */
static void min_headroom(const struct cg_level *lv, void *arg)
{
	struct headroom *h = arg;
	uint64_t lim = level_limit(lv), used, act, inact, room;
	char path[4200];

	if (lim == UINT64_MAX)
		return;
	snprintf(path, sizeof(path), "%s/%s", lv->dir,
		 lv->v2 ? "memory.current" : "memory.usage_in_bytes");
	used = read_limit(path, "");
	snprintf(path, sizeof(path), "%s/memory.stat", lv->dir);
	act = read_limit(path, lv->v2 ? "active_file " : "total_active_file ");
	inact = read_limit(path, lv->v2 ? "inactive_file " : "total_inactive_file ");
	if (used == UINT64_MAX || act == UINT64_MAX || inact == UINT64_MAX)
		return;
	used = used > act + inact ? used - act - inact : 0;
	room = lim > used ? lim - used : 0;
	if (room < h->room) {
		h->room = room;
		h->scale = lim;
	}
}

int zr_mem_headroom(uint64_t *headroom, uint64_t *scale)
{
	struct headroom h = { UINT64_MAX, UINT64_MAX };
	uint64_t avail = read_limit("/proc/meminfo", "MemAvailable:");
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);

	if (avail != UINT64_MAX && pages > 0 && psize > 0) {
		h.room = avail * 1024;
		h.scale = (uint64_t)pages * (uint64_t)psize;
	}
	for_each_level(min_headroom, &h);
	*headroom = h.room;
	*scale = h.scale;
	return h.room == UINT64_MAX ? -ENOENT : 0;
}

unsigned zr_daemon_cpus(cpu_set_t *set)
{
	int n;

	if (sched_getaffinity(0, sizeof(*set), set) != 0)
		memset(set, 0xff, sizeof(*set));
	n = CPU_COUNT(set);
	return n > 0 ? (unsigned)n : 1;
}

/*
 * zr_proc_stat_cpu() - the next cpuN line of /proc/stat's text, at or after
 * @p: its CPU number, its idle ticks (idle and I/O wait) and all its ticks
 * (the first eight fields). Lines that do not parse are skipped.
 * @return where to look for the line after it, or NULL when none is left.
 */
const char *zr_proc_stat_cpu(const char *p, unsigned *cpu, uint64_t *idle, uint64_t *total)
{
	for (p = strstr(p, "\ncpu"); p; p = strstr(p + 1, "\ncpu")) {
		unsigned long long v[8] = { 0 };

		if (sscanf(p + 1, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", cpu, &v[0],
			   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 6)
			continue;
		*total = 0;
		for (unsigned i = 0; i < 8; i++)
			*total += v[i];
		*idle = v[3] + v[4];
		return p + 1;
	}
	return NULL;
}

int zr_cpu_look_open(struct zr_cpu_look *l, const cpu_set_t *cpus)
{
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int err;

	l->cpus = *cpus;
	/* (the cpuN lines come first: room for them is enough) */
	l->len = 4096 + (size_t)(ncpu > 0 ? ncpu : CPU_SETSIZE) * 160;
	l->fd = -1;
	if (!(l->buf = malloc(l->len)))
		return -ENOMEM;
	l->fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	if (l->fd < 0) {
		err = -errno;
		free(l->buf);
		l->buf = NULL;
		return err;
	}
	return 0;
}

void zr_cpu_look_close(struct zr_cpu_look *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	free(l->buf);
	l->buf = NULL;
}

int zr_cpu_ticks(struct zr_cpu_look *l, uint64_t *idle, uint64_t *total)
{
	ssize_t n = l->fd < 0 ? -1 : pread(l->fd, l->buf, l->len - 1, 0);
	uint64_t i, t;
	bool seen = false;
	const char *p;
	unsigned cpu;

	if (n <= 0)
		return -1;
	l->buf[n] = 0;
	*idle = *total = 0;
	for (p = l->buf; (p = zr_proc_stat_cpu(p, &cpu, &i, &t));) {
		if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &l->cpus))
			continue;
		*idle += i;
		*total += t;
		seen = true;
	}
	return seen ? 0 : -1;
}

uint64_t zr_phys_ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long psize = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || psize <= 0)
		return 0;
	return (uint64_t)pages * (uint64_t)psize;
}

/* RAM this process may use: the machine's, or its cgroup's limit if lower
 * (a size= in percent is a share of it). */
uint64_t zr_ram_bytes(void)
{
	uint64_t ram = zr_phys_ram_bytes();

	return ram ? ZR_MIN(ram, zr_mem_limit()) : 0;
}

/*
 * Parse a non-negative decimal with an optional fraction ("12", "1.5",
 * ".5"), nothing else: no sign, blanks, exponent or hex, all of which
 * strtold() would take ("0x10" is not sixteen here); end in *end.
 * @return 0, -EINVAL (no digits) or -ERANGE.
 */
static int parse_decimal(const char *s, long double *val, const char **end)
{
	const char *p = s;
	size_t digits = 0;
	char *e;
	long double v;

	for (; isdigit((unsigned char)*p); p++)
		digits++;
	if (*p == '.')
		for (p++; isdigit((unsigned char)*p); p++)
			digits++;
	if (digits == 0)
		return -EINVAL;
	errno = 0;
	v = strtold(s, &e);
	if (errno == ERANGE)
		return -ERANGE;
	if (e != p)	/* (strtold reads what the scan did, and no more) */
		return -EINVAL;
	*val = v;
	*end = p;
	return 0;
}

int zr_parse_size(const char *s, uint64_t ram_bytes, uint64_t *out)
{
	long double v, mult = 1;
	const char *e;
	int rc;

	if (!s || !*s)
		return -EINVAL;
	rc = parse_decimal(s, &v, &e);
	if (rc)
		return rc;
	if (*e == '%') {
		if (e[1] != '\0' || v > 100 || ram_bytes == 0)
			return -EINVAL;
		*out = (uint64_t)(v * (long double)ram_bytes / 100);
		return 0;
	}
	switch (tolower((unsigned char)*e)) {
	case '\0': break;
	case 'k': mult = 1024.0L; e++; break;
	case 'm': mult = 1024.0L * 1024; e++; break;
	case 'g': mult = 1024.0L * 1024 * 1024; e++; break;
	case 't': mult = 1024.0L * 1024 * 1024 * 1024; e++; break;
	default: return -EINVAL;
	}
	if (mult > 1 && (strcasecmp(e, "ib") == 0 || strcasecmp(e, "b") == 0))
		e += strlen(e);
	if (*e != '\0')
		return -EINVAL;
	v *= mult;
	if (v > (long double)UINT64_MAX)
		return -ERANGE;
	if (mult == 1 && v != (long double)(uint64_t)v)
		return -EINVAL;	/* a fraction of a byte */
	*out = (uint64_t)v;
	return 0;
}

int zr_parse_duration_ms(const char *s, uint64_t *out)
{
	long double v, mult = 1000;
	const char *e;
	int rc;

	if (!s || !*s)
		return -EINVAL;
	rc = parse_decimal(s, &v, &e);
	if (rc)
		return rc;
	if (strcmp(e, "ms") == 0)
		mult = 1;
	else if (strcmp(e, "s") == 0 || *e == '\0')
		mult = 1000;
	else if (strcmp(e, "m") == 0 || strcmp(e, "min") == 0)
		mult = 60000;
	else if (strcmp(e, "h") == 0)
		mult = 3600000;
	else
		return -EINVAL;
	v *= mult;
	if (v > (long double)UINT64_MAX / 2)
		return -ERANGE;
	*out = (uint64_t)v;
	return 0;
}

char *zr_human_size(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTP";
	double v = (double)bytes;
	unsigned u = 0;

	while (v >= 1024 && u + 1 < sizeof(units) - 1) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
	return buf;
}

static int log_syslog;
static enum zr_log_level log_level = ZR_LOG_INFO;

void zr_log_use_syslog(const char *ident)
{
	openlog(ident, LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

void zr_log_set_level(enum zr_log_level level)
{
	log_level = level;
}

void zr_log(enum zr_log_level level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog((int)level, fmt, ap);
	} else {
		fputs("zramfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	}
	va_end(ap);
}

void zr_unescape_octal(char *s)
{
	char *w = s;

	for (char *r = s; *r; ) {
		if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' &&
		    r[2] >= '0' && r[2] <= '7' && r[3] >= '0' && r[3] <= '7') {
			*w++ = (char)((r[1] - '0') << 6 | (r[2] - '0') << 3 | (r[3] - '0'));
			r += 4;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
}
