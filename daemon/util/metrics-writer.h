/* SPDX-License-Identifier: GPL-2.0-only */
/* Prometheus text format (0.0.4) for the families each component writes into /metrics: the HELP
 * and TYPE lines, then samples. One writer, so a family's header, its label quoting and its number
 * formats are the same everywhere. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* "# HELP name help\n# TYPE name type\n"; type is "counter", "gauge", "summary", "histogram". */
void metric_family(FILE *f, const char *name, const char *type, const char *help);

/* One sample line: "name value" or "name{labels} value"; labels is already formatted
 * (`reason="x",type="y"`), NULL or "" for none. */
void metric_sample(FILE *f, const char *name, const char *labels, uint64_t value);
/* The same with a non-integer value printed "%.6f" (seconds, ratios). */
void metric_sample_double(FILE *f, const char *name, const char *labels, double value);
/* ... with decimals digits after the point, for families that have always printed another
 * precision (process_cpu_seconds_total "%.2f", as the Prometheus clients print it). */
void metric_sample_fixed(FILE *f, const char *name, const char *labels, double value, int decimals);

/* A family with one unlabelled sample. */
void metric_counter(FILE *f, const char *name, const char *help, uint64_t value);
void metric_gauge(FILE *f, const char *name, const char *help, uint64_t value);
/* Nanoseconds written as seconds ("%.6f"): a counter of time spent, or a gauge. */
void metric_counter_seconds(FILE *f, const char *name, const char *help, uint64_t ns);
void metric_gauge_seconds(FILE *f, const char *name, const char *help, uint64_t ns);

/* The labelled samples of one family, one per index: name{label="names[i]"} values[i]. A NULL
 * name is skipped (a reason not reported). metric_labelled() writes the family header first. */
void metric_labelled_samples(FILE *f, const char *name, const char *label, const char *const *names,
                             const uint64_t *values, size_t n);
void metric_labelled(FILE *f, const char *name, const char *type, const char *help, const char *label,
                     const char *const *names, const uint64_t *values, size_t n);
