/* SPDX-License-Identifier: GPL-2.0-only */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "labels.h"

static const char *const label_names[_LABEL_MAX] = {
        [LABEL_COMM] = "comm",         [LABEL_PID] = "pid",   [LABEL_THREAD_ID] = "thread_id",
        [LABEL_THREAD_NAME] = "thread_name", [LABEL_UNIT] = "unit", [LABEL_CONTAINER_ID] = "container_id",
};

const char *label_to_string(Label l)
{
        return l >= 0 && l < _LABEL_MAX ? label_names[l] : NULL;
}

int label_set_parse(const char *s, LabelSet *ret, const char **ret_bad)
{
        static char bad[64];
        LabelSet set = {};

        while (*s) {
                size_t len = strcspn(s, ",");
                bool found = false;
                for (int l = 0; l < _LABEL_MAX; l++)
                        if (strlen(label_names[l]) == len && strncmp(s, label_names[l], len) == 0) {
                                set.enabled[l] = found = true;
                                break;
                        }
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
