/* SPDX-License-Identifier: GPL-2.0-only */
#include <inttypes.h>

#include "util/macro.h"
#include "util/metrics-writer.h"

void metric_family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metric_sample(FILE *f, const char *name, const char *labels, uint64_t value)
{
        if (labels && *labels)
                fprintf(f, "%s{%s} %" PRIu64 "\n", name, labels, value);
        else
                fprintf(f, "%s %" PRIu64 "\n", name, value);
}

void metric_sample_fixed(FILE *f, const char *name, const char *labels, double value, int decimals)
{
        if (labels && *labels)
                fprintf(f, "%s{%s} %.*f\n", name, labels, decimals, value);
        else
                fprintf(f, "%s %.*f\n", name, decimals, value);
}

void metric_sample_double(FILE *f, const char *name, const char *labels, double value)
{
        metric_sample_fixed(f, name, labels, value, 6);
}

void metric_counter(FILE *f, const char *name, const char *help, uint64_t value)
{
        metric_family(f, name, "counter", help);
        metric_sample(f, name, NULL, value);
}

void metric_gauge(FILE *f, const char *name, const char *help, uint64_t value)
{
        metric_family(f, name, "gauge", help);
        metric_sample(f, name, NULL, value);
}

void metric_counter_seconds(FILE *f, const char *name, const char *help, uint64_t ns)
{
        metric_family(f, name, "counter", help);
        metric_sample_double(f, name, NULL, (double)ns / NSEC_PER_SEC);
}

void metric_gauge_seconds(FILE *f, const char *name, const char *help, uint64_t ns)
{
        metric_family(f, name, "gauge", help);
        metric_sample_double(f, name, NULL, (double)ns / NSEC_PER_SEC);
}

void metric_labelled_samples(FILE *f, const char *name, const char *label, const char *const *names,
                             const uint64_t *values, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (names[i])
                        fprintf(f, "%s{%s=\"%s\"} %" PRIu64 "\n", name, label, names[i], values[i]);
}

void metric_labelled(FILE *f, const char *name, const char *type, const char *help, const char *label,
                     const char *const *names, const uint64_t *values, size_t n)
{
        metric_family(f, name, type, help);
        metric_labelled_samples(f, name, label, names, values, n);
}
