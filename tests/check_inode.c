// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * check_inode.c - unit tests of the inode table (src/inode.c): a lookup of
 * the inode number of a file whose removal from the backing tree is in
 * flight (zr_inode_removing() .. zr_inode_removed()) waits for the removal,
 * then finds the old inode again if it failed, or makes a new one if the
 * file went (its number then belongs to a new file); a stat that finds
 * another kind of file under a number is taken again before the inode of
 * that number is taken for removed, and a name a stale stat found is not
 * given to a file that has another; a reader of a name waits for a rename
 * of the inode in flight, and only for one (zr_rename_wait()).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"

/* The part of a zr_fs that the inode table uses. */
static void fs_init(struct zr_fs *fs)
{
	memset(fs, 0, sizeof(*fs));
	pthread_mutex_init(&fs->itable_lock, NULL);
	pthread_mutex_init(&fs->fd_lock, NULL);
	pthread_rwlock_init(&fs->ns_lock, NULL);
	fs->root.key.dev = 1;
	fs->root.key.ino = 2;
	fs->root.fd = -1;
	fs->orphans.fd = -1;
}

static void fs_fini(struct zr_fs *fs)
{
	ck_assert_ptr_null(fs->inodes);
	ck_assert_ptr_null(fs->dead);
	ck_assert_ptr_null(fs->removing);
	pthread_mutex_destroy(&fs->itable_lock);
	pthread_mutex_destroy(&fs->fd_lock);
	pthread_rwlock_destroy(&fs->ns_lock);
}

static struct stat file_st(ino_t ino)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_dev = 1;
	st.st_ino = ino;
	st.st_mode = S_IFREG | 0644;
	return st;
}

struct looker {
	struct zr_fs *fs;
	struct stat st;
	struct zr_inode *found;
	int rc;
	int waits;	/* lookups that waited (-EAGAIN) */
	int done;	/* atomic */
};

/* A lookup as do_lookup_stat() makes it: again after -EAGAIN. */
static void *look(void *arg)
{
	struct looker *l = arg;

	while ((l->rc = zr_inode_lookup(l->fs, NULL, -1, "f", &l->st, false, &l->found)) == -EAGAIN)
		l->waits++;
	__atomic_store_n(&l->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Whether a lookup holds a reference to @a besides the test's own. */
static bool waiting(struct zr_fs *fs, struct zr_inode *a)
{
	bool w;

	pthread_mutex_lock(&fs->itable_lock);
	w = a->refs > 1;
	pthread_mutex_unlock(&fs->itable_lock);
	return w;
}

/* Remove file 5 (the removal failing unless @gone) while another thread
 * looks number 5 up: @return what the lookup found, the old inode in *@old. */
static struct zr_inode *race(struct zr_fs *fs, bool gone, struct zr_inode **old)
{
	struct stat st = file_st(5);
	struct looker l = { .fs = fs, .st = st };
	struct zr_inode *a;
	pthread_t t;

	ck_assert_int_eq(zr_inode_lookup(fs, NULL, -1, "f", &st, false, &a), 0);
	pthread_rwlock_wrlock(&a->lock);	/* as remove_name() holds it */
	ck_assert(zr_inode_removing(fs, a));
	ck_assert(!zr_inode_removing(fs, a));	/* out of the table already */
	ck_assert_int_eq(pthread_create(&t, NULL, look, &l), 0);
	/* the lookup finds the removal (it takes a reference to wait on
	 * the inode's lock: 10 s at most for it to get there, on a loaded
	 * machine), and waits: it must not make an inode for a number
	 * whose file may still be there */
	for (int i = 0; i < 1000 && !waiting(fs, a) && !__atomic_load_n(&l.done, __ATOMIC_ACQUIRE); i++)
		sleep_ms(10);
	sleep_ms(50);
	ck_assert_int_eq(__atomic_load_n(&l.done, __ATOMIC_ACQUIRE), 0);
	ck_assert(waiting(fs, a));
	ck_assert_ptr_null(fs->inodes);
	zr_inode_removed(fs, a, gone);
	pthread_rwlock_unlock(&a->lock);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(l.rc, 0);
	ck_assert_int_eq(l.waits, 1);
	ck_assert_ptr_null(fs->removing);
	*old = a;
	return l.found;
}

START_TEST(test_removal_failed)
{
	struct zr_fs fs;
	struct zr_inode *a, *b;

	fs_init(&fs);
	b = race(&fs, false, &a);
	/* the file is still there: the same inode, back in the table */
	ck_assert_ptr_eq(b, a);
	ck_assert(!a->unhashed);
	ck_assert_uint_eq(a->nlookup, 2);
	zr_inode_forget(&fs, a, 2);
	fs_fini(&fs);
}
END_TEST

START_TEST(test_removal_done)
{
	struct zr_fs fs;
	struct zr_inode *a, *b;

	fs_init(&fs);
	b = race(&fs, true, &a);
	/* the number is a new file's: a new inode, the old one out */
	ck_assert_ptr_ne(b, a);
	ck_assert(a->unhashed);
	ck_assert(!b->unhashed);
	ck_assert_uint_eq(b->nlookup, 1);
	zr_inode_forget(&fs, a, 1);
	zr_inode_forget(&fs, b, 1);
	fs_fini(&fs);
}
END_TEST

/* Lookups of other numbers do not wait for a removal. */
START_TEST(test_other_numbers)
{
	struct zr_fs fs;
	struct stat st = file_st(5), st6 = file_st(6);
	struct zr_inode *a, *c;

	fs_init(&fs);
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "f", &st, false, &a), 0);
	pthread_rwlock_wrlock(&a->lock);
	ck_assert(zr_inode_removing(&fs, a));
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "g", &st6, false, &c), 0);
	ck_assert_ptr_ne(c, a);
	zr_inode_removed(&fs, a, true);
	pthread_rwlock_unlock(&a->lock);
	zr_inode_forget(&fs, a, 1);
	zr_inode_forget(&fs, c, 1);
	fs_fini(&fs);
}
END_TEST

/*
 * A lookup whose stat says number 5 is a directory while the table holds a
 * regular file 5: the stat may be stale (a revalidating LOOKUP races with
 * an rmdir and a create that got the number), so the file stays in the
 * table and the caller is told to stat again (-ESTALE); only a stat taken
 * again (@confirmed) takes the file for removed behind zramfs's back.
 */
START_TEST(test_type_mismatch)
{
	struct zr_fs fs;
	struct stat st = file_st(5), dir = file_st(5);
	struct zr_inode *a, *b = NULL;

	dir.st_mode = S_IFDIR | 0755;
	fs_init(&fs);
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "f", &st, false, &a), 0);
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "d", &dir, false, &b), -ESTALE);
	ck_assert_ptr_null(b);
	ck_assert(!a->unhashed);
	ck_assert_uint_eq(a->nlookup, 1);
	/* the file is still the one found under its number */
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "f", &st, false, &b), 0);
	ck_assert_ptr_eq(b, a);
	zr_inode_forget(&fs, b, 1);
	/* confirmed: the directory gets its own inode, the file goes */
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "d", &dir, true, &b), 0);
	ck_assert_ptr_ne(b, a);
	ck_assert(a->unhashed);
	ck_assert_uint_eq(b->type, S_IFDIR);
	zr_inode_forget(&fs, a, 1);
	zr_inode_forget(&fs, b, 1);
	fs_fini(&fs);
}
END_TEST

/*
 * A lookup whose stat of a name is older than a rename of the file: the
 * file's name is the new one already, and the lookup must not give it the
 * old one back (the kernel revalidates a cached name without the
 * directory's lock). It is told to stat again (-EAGAIN); a name that does
 * reach the file is added (a hard link).
 */
START_TEST(test_stale_name)
{
	char tmp[] = "/tmp/check_inode.XXXXXX";
	struct zr_fs fs;
	struct stat pst, ast;
	struct zr_inode *d, *x, *y = NULL;
	int dfd, pfd;

	ck_assert_ptr_nonnull(mkdtemp(tmp));
	dfd = open(tmp, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(mkdirat(dfd, "p", 0755), 0);
	pfd = openat(dfd, "p", O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(pfd, 0);
	close(openat(pfd, "a", O_CREAT | O_WRONLY, 0644));
	ck_assert_int_eq(fstat(pfd, &pst), 0);
	ck_assert_int_eq(fstatat(pfd, "a", &ast, 0), 0);
	fs_init(&fs);
	fs.root.key.dev = pst.st_dev;
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "p", &pst, false, &d), 0);
	ck_assert_int_eq(zr_inode_lookup(&fs, d, pfd, "a", &ast, false, &x), 0);
	/* renamed to b, as zr_op_rename() does it */
	ck_assert_int_eq(renameat(pfd, "a", pfd, "b"), 0);
	zr_alias_rename(&fs, x, d, "a", d, zr_alias_new("b"));
	/* the stale lookup of a: a stat taken before the rename */
	ck_assert_int_eq(zr_inode_lookup(&fs, d, pfd, "a", &ast, false, &y), -EAGAIN);
	ck_assert_ptr_null(y);
	ck_assert_ptr_nonnull(x->aliases);
	ck_assert_str_eq(x->aliases->name, "b");
	ck_assert_ptr_null(x->aliases->next);
	ck_assert_uint_eq(x->nlookup, 1);
	/* a second name that reaches it is added */
	ck_assert_int_eq(linkat(pfd, "b", pfd, "c", 0), 0);
	ck_assert_int_eq(zr_inode_lookup(&fs, d, pfd, "c", &ast, false, &y), 0);
	ck_assert_ptr_eq(y, x);
	ck_assert_ptr_nonnull(x->aliases->next);
	zr_inode_forget(&fs, x, 2);
	zr_inode_forget(&fs, d, 1);
	fs_fini(&fs);
	unlinkat(pfd, "b", 0);
	unlinkat(pfd, "c", 0);
	close(pfd);
	unlinkat(dfd, "p", AT_REMOVEDIR);
	close(dfd);
	rmdir(tmp);
}
END_TEST

struct waiter {
	struct zr_fs *fs;
	struct zr_inode *ino;
	unsigned mark;
	bool again;
	int done;	/* atomic */
};

static void *wait_rename(void *arg)
{
	struct waiter *w = arg;

	w->again = zr_rename_wait(w->fs, w->ino, w->mark);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * zr_rename_wait(): a name read after a mark, which disappointed its
 * reader, is taken for what it reached at once when no rename of the
 * inode began since the mark; else the reader waits for one to end
 * (however long it takes) and reads the names again.
 */
START_TEST(test_rename_wait)
{
	struct zr_fs fs;
	struct stat st = file_st(5);
	struct zr_inode *a;
	struct waiter w = { .fs = &fs };
	pthread_t t;
	unsigned mark;

	fs_init(&fs);
	pthread_mutex_init(&fs.rename_lock, NULL);
	pthread_cond_init(&fs.rename_cond, NULL);
	ck_assert_int_eq(zr_inode_lookup(&fs, NULL, -1, "f", &st, false, &a), 0);
	w.ino = a;
	/* no rename: the answer stands */
	mark = zr_rename_mark(a);
	ck_assert(!zr_rename_wait(&fs, a, mark));
	/* one began and ended since the mark: read again, no wait */
	zr_rename_begin(a);
	zr_rename_end(&fs, a);
	ck_assert(zr_rename_wait(&fs, a, mark));
	mark = zr_rename_mark(a);
	ck_assert(!zr_rename_wait(&fs, a, mark));
	/* in flight at the mark, and one that began after it: wait */
	for (int before = 1; before >= 0; before--) {
		if (before)
			zr_rename_begin(a);
		w.mark = zr_rename_mark(a);
		if (!before)
			zr_rename_begin(a);
		w.done = 0;
		ck_assert_int_eq(pthread_create(&t, NULL, wait_rename, &w), 0);
		sleep_ms(50);
		ck_assert_int_eq(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE), 0);
		zr_rename_end(&fs, a);
		ck_assert_int_eq(pthread_join(t, NULL), 0);
		ck_assert(w.again);
		mark = zr_rename_mark(a);
		ck_assert(!zr_rename_wait(&fs, a, mark));
	}
	ck_assert_uint_eq(fs.rename_waiters, 0);
	zr_inode_forget(&fs, a, 1);
	pthread_mutex_destroy(&fs.rename_lock);
	pthread_cond_destroy(&fs.rename_cond);
	fs_fini(&fs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("inode");
	TCase *tc = tcase_create("removal");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_removal_failed);
	tcase_add_test(tc, test_removal_done);
	tcase_add_test(tc, test_other_numbers);
	tcase_add_test(tc, test_type_mismatch);
	tcase_add_test(tc, test_stale_name);
	tcase_add_test(tc, test_rename_wait);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
