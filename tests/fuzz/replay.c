/* SPDX-License-Identifier: MIT */
/*
 * replay.c - the main() of a fuzz target in a build without libFuzzer: feed
 * every file named on the command line (or found in a directory named there)
 * to LLVMFuzzerTestOneInput once, in sorted order.  This is how each seed
 * corpus, and every crash input kept as a regression, runs as a normal test
 * in every build (gcc, ASan/UBSan, valgrind).
 *
 * A target reports a violated invariant by abort(); a sanitizer report or a
 * crash fails the test the same way.  An empty corpus fails too, so a typo in
 * a path cannot make the test pass vacuously.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

/* Larger than any input a target accepts (frames cap at 64 KiB); seeds are
 * small, so a bigger file is a mistake in the corpus. */
#define REPLAY_INPUT_MAX (1024 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -errno;
	}
	if (st.st_size > REPLAY_INPUT_MAX) {
		fprintf(stderr, "replay: %s: larger than %d bytes\n", path, REPLAY_INPUT_MAX);
		return -EFBIG;
	}
	/* An exact-size heap copy, so ASan flags any read past the input. */
	size_t size = (size_t)st.st_size;
	_cleanup_free_ uint8_t *data = malloc(size ? size : 1);
	if (!data)
		return -ENOMEM;
	size_t have = 0;
	while (have < size) {
		ssize_t n = read(fd, data + have, size - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "replay: %s: short read\n", path);
			return -EIO;
		}
		have += (size_t)n;
	}
	LLVMFuzzerTestOneInput(data, size);
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of inputs replayed, or -errno. */
static int replay_dir(const char *dir)
{
	_cleanup_closedir_ DIR *d = opendir(dir);
	char **names = NULL;
	size_t count = 0, cap = 0;
	struct dirent *de;
	int r = 0, done = 0;

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -errno;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (count == cap) {
			cap = cap ? 2 * cap : 64;
			char **bigger = realloc(names, cap * sizeof(*names));
			if (!bigger) {
				r = -ENOMEM;
				goto out;
			}
			names = bigger;
		}
		if (asprintf(&names[count], "%s/%s", dir, de->d_name) < 0) {
			r = -ENOMEM;
			goto out;
		}
		count++;
	}
	qsort(names, count, sizeof(*names), name_cmp);
	for (size_t i = 0; i < count; i++) {
		r = replay_file(names[i]);
		if (r < 0)
			goto out;
		done++;
	}
	r = done;
out:
	for (size_t i = 0; i < count; i++)
		free(names[i]);
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 2;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int r;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (S_ISDIR(st.st_mode))
			r = replay_dir(argv[i]);
		else
			r = replay_file(argv[i]) < 0 ? -1 : 1;
		if (r < 0)
			return 1;
		total += r;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no inputs found\n");
		return 1;
	}
	printf("replayed %d inputs\n", total);
	return 0;
}
