/* SPDX-License-Identifier: GPL-2.0-only */
/* The start-up kernel check on release strings: the 5.10 floor, the known-bug releases (5.19, 6.0)
 * refused unless PROFD_ALLOW_UNSAFE_KERNEL=1, and everything else accepted. */
#include <errno.h>
#include <stdlib.h>

#include "lib/test-util.h"
#include "service/capabilities.h"
#include "util/log.h"

int main(void)
{
        static const struct {
                const char *release;
                int want;
        } cases[] = {
                {"4.19.0-21-amd64", -EOPNOTSUPP},  {"5.4.0-150-generic", -EOPNOTSUPP},
                {"5.9.16", -EOPNOTSUPP},           {"5.10.0-43-cloud-amd64", 0},
                {"5.15.0-91-generic", 0},          {"5.19.0-50-generic", -EOPNOTSUPP},
                {"6.0.12-300.fc37.x86_64", -EOPNOTSUPP}, {"6.1.0-56-cloud-amd64", 0},
                {"6.12.117+deb13-cloud-amd64", 0}, {"6.18.44-fc-v769", 0},
                {"10.0.0", 0},
        };

        log_open();
        unsetenv("PROFD_ALLOW_UNSAFE_KERNEL");
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                check(kernel_check_release(cases[i].release) == cases[i].want, "%s: %s", cases[i].release,
                      cases[i].want == 0 ? "accepted" : "refused");
        setenv("PROFD_ALLOW_UNSAFE_KERNEL", "1", 1);
        check(kernel_check_release("5.19.0-50-generic") == 0, "5.19 runs with PROFD_ALLOW_UNSAFE_KERNEL=1");
        check(kernel_check_release("5.9.16") == -EOPNOTSUPP, "the 5.10 floor holds with PROFD_ALLOW_UNSAFE_KERNEL=1");
        printf("%s\n", failures ? "FAILED" : "all passed");
        return failures ? 1 : 0;
}
