/* SPDX-License-Identifier: Apache-2.0 */
/* XML/HTML text output shared by every SVG and HTML writer. */
#ifndef STRATA_LIB_XML_STR_H
#define STRATA_LIB_XML_STR_H

#include <stddef.h>
#include <stdio.h>

/*
 * Writes at most max code points of s as XML character data or attribute
 * text (also right for HTML).  Markup characters are escaped; invalid
 * UTF-8 and the control characters XML 1.0 forbids become U+FFFD; tab and
 * newlines become spaces, so one name stays one line.  s may be NULL.
 */
void xml_write_text(FILE *out, const char *s, size_t max);

/* Code points in s, counting each invalid byte as one (as xml_write_text). */
size_t utf8_count(const char *s);

#endif /* STRATA_LIB_XML_STR_H */
