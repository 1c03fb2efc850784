/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the cmocka unit tests (include after cmocka.h). */
#ifndef STRATA_TEST_UTIL_H
#define STRATA_TEST_UTIL_H

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The whole file at path, malloc'd; its size in *len.  Asserts on error. */
static inline void *read_all(const char *path, size_t *len)
{
	struct stat st;
	void *buf;
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size);
	assert_non_null(buf);
	assert_int_equal(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

#endif /* STRATA_TEST_UTIL_H */
