/* SPDX-License-Identifier: GPL-2.0-only */
/* A shared library that tests/proc-tracker/helper dlopen()s after it started. */
int proc_helper_lib_work(int n);

int proc_helper_lib_work(int n)
{
        volatile int x = 0;

        for (int i = 0; i < n; i++)
                x += i;
        return x;
}
