/* SPDX-License-Identifier: GPL-2.0-only */
/* The per-sample labels profd can attach, selected with --labels / ?labels=. */
#pragma once

#include <stdbool.h>

typedef enum Label {
        LABEL_COMM,      /* process name */
        LABEL_PID,       /* numeric */
        LABEL_THREAD_ID, /* "tid", numeric */
        LABEL_THREAD_NAME,
        LABEL_UNIT,         /* systemd unit from the cgroup */
        LABEL_CONTAINER_ID, /* from the cgroup path */
        _LABEL_MAX,
} Label;

typedef struct LabelSet {
        bool enabled[_LABEL_MAX];
} LabelSet;

const char *label_to_string(Label l);
/* pid and tid are numeric pprof labels (num + num_unit), the others strings. */
bool label_is_numeric(Label l);
/* Comma-separated names ("thread_id" is accepted for tid); "" selects none. -EINVAL with
 * *ret_bad pointing at the unknown name. */
int label_set_parse(const char *s, LabelSet *ret, const char **ret_bad);
