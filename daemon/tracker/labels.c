/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tracker/labels.h"

/* pid and tid are the keys Google's perf_to_profile uses for the same numeric labels. */
static const char *const label_names[_LABEL_MAX] = {
        [LABEL_COMM] = "comm",     [LABEL_PID] = "pid",
        [LABEL_THREAD_ID] = "tid", [LABEL_THREAD_NAME] = "thread_name",
        [LABEL_UNIT] = "unit",     [LABEL_CONTAINER_ID] = "container_id",
};

const char *label_to_string(Label l)
{
        return l >= 0 && l < _LABEL_MAX ? label_names[l] : NULL;
}

bool label_is_numeric(Label l)
{
        return l == LABEL_PID || l == LABEL_THREAD_ID;
}

static bool name_is(const char *s, size_t len, const char *name)
{
        return strlen(name) == len && strncmp(s, name, len) == 0;
}

int label_set_parse(const char *s, LabelSet *ret, const char **ret_bad)
{
        static char bad[64];
        LabelSet set = {};

        while (*s) {
                size_t len = strcspn(s, ",");
                bool found = false;
                for (int l = 0; l < _LABEL_MAX; l++)
                        if (name_is(s, len, label_names[l])) {
                                set.enabled[l] = found = true;
                                break;
                        }
                /* The tid label's name before it became numeric: configurations keep working. */
                if (!found && name_is(s, len, "thread_id"))
                        set.enabled[LABEL_THREAD_ID] = found = true;
                if (!found && len > 0) {
                        if (ret_bad) {
                                snprintf(bad, sizeof(bad), "%.*s", (int)(len < 60 ? len : 60), s);
                                *ret_bad = bad;
                        }
                        return -EINVAL;
                }
                s += len;
                if (*s == ',')
                        s++;
        }
        *ret = set;
        return 0;
}
