// SPDX-License-Identifier: GPL-2.0-or-later
/* util.c - clocks, size/duration parsing and logging shared by every part. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
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

uint64_t zr_now_ms(void)
{
	return zr_now_ns() / 1000000ull;
}

uint64_t zr_ram_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	long psize = sysconf(_SC_PAGESIZE);

	if (pages <= 0 || psize <= 0)
		return 0;
	return (uint64_t)pages * (uint64_t)psize;
}

/* Parse a non-negative decimal with an optional fraction; end in *end. */
static int parse_decimal(const char *s, long double *val, const char **end)
{
	char *e;
	long double v;

	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s) && *s != '.')
		return -EINVAL;
	errno = 0;
	v = strtold(s, &e);
	if (e == s || errno == ERANGE || v < 0)
		return errno == ERANGE ? -ERANGE : -EINVAL;
	*val = v;
	*end = e;
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
