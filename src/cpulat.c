// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * cpulat.c - keep idle CPUs quick to wake while requests flow.
 *
 * Every FUSE request is a round trip between two tasks: the caller sleeps
 * until a daemon thread, woken for the request, has replied. A workload of
 * small files (untar, rm -rf, a compiler opening headers) is a chain of such
 * round trips, and each one pays for waking a sleeping task, twice. When
 * the CPU that must run the woken task has gone into an idle state, the
 * wake-up costs that state's exit latency: on a laptop, tens of µs from a
 * deep C-state; in a KVM guest whose idle state is HLT, a VM exit and an
 * inter-processor interrupt, which on the 2-vCPU machines we test on
 * doubled the time of an untar of 10,000 files (3.9 s against 1.9 s).
 *
 * While requests come in bursts, we hold a CPU latency request of the
 * kernel's PM QoS (/dev/cpu_dma_latency, the interface tuned and real-time
 * tools use) of cpu_latency µs: cpuidle then only picks idle states that
 * wake at least that fast (at 0, idle CPUs poll). ZR_LAT_HOLD_MS after the
 * last burst the request is put back to "no constraint", so a mount that is
 * used lightly or not at all costs no power; cpu_latency=off never asks.
 * Without the device (not root, a container) the option does nothing and
 * says so once; without a cpuidle driver (some VMs: idle CPUs then always
 * halt, whatever is asked) the request is held all the same, and the log
 * says it changes nothing here.
 *
 * Locking: lat_fd and lat_running are set before the session loop starts
 * and cleared after it ends. lat_last_ms (the last burst), lat_win and
 * lat_count (requests in the current window) are relaxed atomics. lat_held and
 * lat_failed are read without the lock (the fast path) and changed, like
 * everything written to lat_fd, under lat_lock; so is lat_stop.
 * lat_raised is a relaxed atomic counter.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "zr_util.h"

/*
 * A burst is at least ZR_LAT_BURST requests within one window of
 * ZR_LAT_WINDOW_MS: an untar sends about 30 a millisecond, a parallel build
 * 20, an editor saving a file or a log appended to now and then far fewer
 * than 3, and those never hold the request. It is dropped ZR_LAT_HOLD_MS
 * after the last burst.
 */
#define ZR_LAT_WINDOW_MS 10
#define ZR_LAT_BURST 32
#define ZR_LAT_HOLD_MS 500

/* What an open /dev/cpu_dma_latency asks for: no constraint
 * (PM_QOS_CPU_LATENCY_DEFAULT_VALUE, in µs). */
#define ZR_LAT_NONE 2000000000

/* Ask for @us. Caller holds lat_lock. @return 0 or -errno. */
static int lat_write(struct zr_fs *fs, int32_t us)
{
	ssize_t n = write(fs->lat_fd, &us, sizeof(us));

	if (n == (ssize_t)sizeof(us))
		return 0;
	return n < 0 ? -errno : -EIO;
}

/* Drops the request once no burst of requests came for ZR_LAT_HOLD_MS. */
static void *lat_main(void *arg)
{
	struct zr_fs *fs = arg;
	struct timespec ts;
	uint64_t idle, last, now;
	int rc;

	pthread_mutex_lock(&fs->lat_lock);
	while (!fs->lat_stop) {
		if (!fs->lat_held) {
			pthread_cond_wait(&fs->lat_cond, &fs->lat_lock);
			continue;
		}
		/* (last before now: a burst noted meanwhile is not "later") */
		last = __atomic_load_n(&fs->lat_last_ms, __ATOMIC_RELAXED);
		now = zr_now_ms();
		idle = now > last ? now - last : 0;
		if (idle < ZR_LAT_HOLD_MS) {
			zr_deadline(&ts, CLOCK_MONOTONIC, (ZR_LAT_HOLD_MS - idle) * 1000000ull);
			pthread_cond_timedwait(&fs->lat_cond, &fs->lat_lock, &ts);
			continue;
		}
		rc = lat_write(fs, ZR_LAT_NONE);
		if (rc)
			zr_log(ZR_LOG_WARNING, "cpu_latency: cannot drop the request: %s",
			       strerror(-rc));
		__atomic_store_n(&fs->lat_held, false, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&fs->lat_lock);
	return NULL;
}

/**
 * zr_cpulat_busy() - note a FUSE request; in a burst, raise the latency
 * request if it is not held. Called by every session thread for every
 * request it reads.
 */
void zr_cpulat_busy(struct zr_fs *fs)
{
	uint64_t now, win;
	uint32_t n;
	int rc;

	if (!fs->lat_running && !fs->opt->busy_poll)
		return;	/* nobody asks whether we are in a burst */
	now = zr_now_ms();
	/* count the requests of this window (racy at its edges: a hint) */
	win = now / ZR_LAT_WINDOW_MS;
	if (__atomic_load_n(&fs->lat_win, __ATOMIC_RELAXED) != win) {
		__atomic_store_n(&fs->lat_win, win, __ATOMIC_RELAXED);
		__atomic_store_n(&fs->lat_count, 0, __ATOMIC_RELAXED);
	}
	n = __atomic_add_fetch(&fs->lat_count, 1, __ATOMIC_RELAXED);
	if (n < ZR_LAT_BURST)
		return;
	/* a burst: at most one store per millisecond, every thread passes */
	if (__atomic_load_n(&fs->lat_last_ms, __ATOMIC_RELAXED) != now)
		__atomic_store_n(&fs->lat_last_ms, now, __ATOMIC_RELAXED);
	if (!fs->lat_running ||
	    __atomic_load_n(&fs->lat_held, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&fs->lat_failed, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&fs->lat_lock);
	if (!fs->lat_held && !fs->lat_failed && !fs->lat_stop) {
		rc = lat_write(fs, (int32_t)fs->opt->cpu_latency);
		if (rc == 0) {
			__atomic_store_n(&fs->lat_held, true, __ATOMIC_RELAXED);
			__atomic_add_fetch(&fs->lat_raised, 1, __ATOMIC_RELAXED);
			pthread_cond_signal(&fs->lat_cond);
		} else {
			/* give up: no retry (and syscall) per request */
			__atomic_store_n(&fs->lat_failed, true, __ATOMIC_RELAXED);
			zr_log(ZR_LOG_WARNING, "cpu_latency: cannot write /dev/cpu_dma_latency: %s",
			       strerror(-rc));
		}
	}
	pthread_mutex_unlock(&fs->lat_lock);
}

/* Whether cpuidle has a driver: without one ("none"), an idle CPU runs the
 * architecture's default idle (HLT) and PM QoS requests change nothing.
 * An unreadable file counts as present (no false note in the log). */
static bool cpuidle_driver_present(void)
{
	char buf[32] = "";
	ssize_t n;
	int fd;

	fd = open("/sys/devices/system/cpu/cpuidle/current_driver", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n <= 0 || strncmp(buf, "none", 4) != 0;
}

/**
 * zr_cpulat_start() - open the PM QoS device and start the thread that
 * drops the request when requests stop. Does nothing with
 * cpu_latency=off, or (with a note in the log) when the device cannot be
 * opened. @return 0 or -errno (the thread could not start).
 */
int zr_cpulat_start(struct zr_fs *fs)
{
	int rc;

	fs->lat_fd = -1;
	pthread_mutex_init(&fs->lat_lock, NULL);
	zr_cond_init_monotonic(&fs->lat_cond);
	fs->lat_inited = true;
	if (fs->opt->cpu_latency < 0)
		return 0;
	/* opening it adds a request that asks for nothing yet */
	fs->lat_fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);
	if (fs->lat_fd < 0) {
		zr_log(ZR_LOG_INFO, "cpu_latency: cannot open /dev/cpu_dma_latency (%s): idle CPUs keep their usual states",
		       strerror(errno));
		return 0;
	}
	if (!cpuidle_driver_present())
		zr_log(ZR_LOG_INFO, "cpu_latency: this kernel has no cpuidle driver: idle CPUs halt whatever is asked, the option changes nothing here");
	rc = pthread_create(&fs->lat_thread, NULL, lat_main, fs);
	if (rc) {
		close(fs->lat_fd);
		fs->lat_fd = -1;
		return -rc;
	}
	pthread_setname_np(fs->lat_thread, "zramfs-cpulat");
	fs->lat_running = true;
	return 0;
}

/** zr_cpulat_stop() - stop the thread and drop the request (idempotent). */
void zr_cpulat_stop(struct zr_fs *fs)
{
	if (!fs->lat_inited)
		return;
	if (fs->lat_running) {
		pthread_mutex_lock(&fs->lat_lock);
		fs->lat_stop = true;
		pthread_cond_signal(&fs->lat_cond);
		pthread_mutex_unlock(&fs->lat_lock);
		pthread_join(fs->lat_thread, NULL);
		fs->lat_running = false;
	}
	if (fs->lat_fd >= 0) {
		/* closing the device removes the request */
		close(fs->lat_fd);
		fs->lat_fd = -1;
	}
}

/**
 * zr_cpulat_bursting() - whether a burst of requests was seen within the
 * last ZR_LAT_HOLD_MS (the window in which the latency request is held);
 * for busy polling (session.c). Only counted while cpu_latency or
 * busy_poll is on.
 */
bool zr_cpulat_bursting(struct zr_fs *fs)
{
	uint64_t last = __atomic_load_n(&fs->lat_last_ms, __ATOMIC_RELAXED);

	return last && zr_now_ms() - last < ZR_LAT_HOLD_MS;
}

/** Whether the latency request is raised now (for the stats). */
bool zr_cpulat_held(struct zr_fs *fs)
{
	return __atomic_load_n(&fs->lat_held, __ATOMIC_RELAXED);
}

/** Times the latency request was raised (for the stats). */
uint64_t zr_cpulat_raised(struct zr_fs *fs)
{
	return __atomic_load_n(&fs->lat_raised, __ATOMIC_RELAXED);
}
