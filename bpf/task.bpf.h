/* SPDX-License-Identifier: GPL-2.0-only */
/* The current task and the kernel features its reads depend on. Defines rodata the daemon sets
 * before load (the profd_have_* flags, profd_thread_size): include from profile.bpf.c only.
 *
 * The flags are probed by daemon/sampler/kernel-features.c. Code behind a false one is dead: the
 * verifier, which knows these frozen values, never looks at it, so helpers newer than the running
 * kernel may appear there. */
#pragma once

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

const volatile bool profd_have_task_btf = true;     /* bpf_get_current_task_btf(), 5.11 */
const volatile bool profd_have_task_pt_regs = true; /* bpf_task_pt_regs(), 5.15 */
/* Without bpf_task_pt_regs(): the user registers saved at syscall/interrupt entry sit at the top of
 * the task's kernel stack (arch_task_user_regs(), arch.bpf.h). The daemon sets THREAD_SIZE (16 KiB;
 * 32 KiB with KASAN). */
const volatile __u32 profd_thread_size = 16384;

#define PF_KTHREAD_FLAG 0x00200000

/* Untyped on kernels before 5.11: every field of it is then read with BPF_CORE_READ. */
static __always_inline struct task_struct *current_task(void)
{
        return profd_have_task_btf ? bpf_get_current_task_btf()
                                   : (struct task_struct *)bpf_get_current_task();
}

/* The task's address space, as a value to compare: exec gives a task a new one. */
static __always_inline __u64 task_mm(struct task_struct *task)
{
        if (profd_have_task_btf)
                return (__u64)task->mm;
        return (__u64)BPF_CORE_READ(task, mm);
}

/* Inside exec (bprm_execve() sets in_execve before it replaces the address space, and clears it
 * after sched_process_exec): the registers saved on entry may be the old image's while the memory
 * is already the new one's, and the daemon's entry for the pid is the old image's until the exec
 * hook deletes it. A walk there could name an old pc against the new image. */
static __always_inline bool task_in_exec(struct task_struct *task)
{
        if (!bpf_core_field_exists(task->in_execve))
                return false;
        /* A typed task is read directly: no helper call on every sample. */
        if (profd_have_task_btf)
                return BPF_CORE_READ_BITFIELD(task, in_execve);
        return BPF_CORE_READ_BITFIELD_PROBED(task, in_execve);
}

static __always_inline bool task_is_kernel_thread(struct task_struct *task)
{
        if (profd_have_task_btf)
                return (task->flags & PF_KTHREAD_FLAG) || !task->mm;
        return (BPF_CORE_READ(task, flags) & PF_KTHREAD_FLAG) || !BPF_CORE_READ(task, mm);
}
