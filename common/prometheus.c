/* SPDX-License-Identifier: MIT */
/* prometheus.c - the text exposition format's lines and escapes (prometheus.h). */
#include "common/prometheus.h"

#include <inttypes.h>
#include <string.h>

/* s with each of the characters in specials written as a backslash escape. */
static void put_escaped(FILE *out, const char *s, const char *specials)
{
	for (;;) {
		size_t n = strcspn(s, specials);

		fwrite(s, 1, n, out);
		s += n;
		if (!*s)
			return;
		fputc('\\', out);
		fputc(*s == '\n' ? 'n' : *s, out);
		s++;
	}
}

void prom_family(FILE *out, const char *name, const char *type, const char *help)
{
	fprintf(out, "# HELP %s ", name);
	put_escaped(out, help, "\\\n");
	fprintf(out, "\n# TYPE %s %s\n", name, type);
}

void prom_sample(FILE *out, const char *name, const struct prom_label *labels, const char *value)
{
	fputs(name, out);
	if (labels && labels[0].name) {
		for (const struct prom_label *l = labels; l->name; l++) {
			fputc(l == labels ? '{' : ',', out);
			fputs(l->name, out);
			fputs("=\"", out);
			put_escaped(out, l->value, "\\\"\n");
			fputc('"', out);
		}
		fputc('}', out);
	}
	fputc(' ', out);
	fputs(value, out);
	fputc('\n', out);
}

void prom_sample_u64(FILE *out, const char *name, const struct prom_label *labels, uint64_t value)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRIu64, value);
	prom_sample(out, name, labels, text);
}

void prom_sample_i64(FILE *out, const char *name, const struct prom_label *labels, int64_t value)
{
	char text[24];

	snprintf(text, sizeof(text), "%" PRId64, value);
	prom_sample(out, name, labels, text);
}

void prom_scalar_u64(FILE *out, const char *name, const char *type, const char *help,
		     uint64_t value)
{
	prom_family(out, name, type, help);
	prom_sample_u64(out, name, NULL, value);
}
