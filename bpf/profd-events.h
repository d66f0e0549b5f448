/* SPDX-License-Identifier: GPL-2.0-only */
/* Process events sent to the daemon over BPF ring buffers. Includes nothing (see profd-sample.h). */
#pragma once

enum profd_event_type {
        PROFD_EV_EXEC = 1,        /* pid exec'd a new image */
        PROFD_EV_EXIT = 2,        /* thread-group leader exited */
        PROFD_EV_MMAP_EXEC = 3,   /* new executable mapping (dlopen, mmap PROT_EXEC, mprotect +X) */
        PROFD_EV_FORK = 4,        /* new process (shares the parent's mappings until exec) */
        PROFD_EV_UNKNOWN_PID = 5, /* unwinder met a pid it has no mappings for (rate-limited) */
        PROFD_EV_UNKNOWN_PC = 6,  /* unwinder met a pc in no known mapping (rate-limited) */
        PROFD_EV_ANON_EXEC = 7,   /* anonymous memory made executable (JIT code): addr, len */
};

struct profd_event {
        __u32 type;
        __u32 pid;
        __u32 ppid;   /* FORK: parent */
        __u32 mnt_ns; /* EXEC: inode number of the process's mount namespace (0: not known) */
        union {
                struct {
                        __u64 addr; /* MMAP_EXEC, ANON_EXEC: start; UNKNOWN_PC: the pc; FORK: PROFD_EV_FORK_*
                                     */
                        __u64 len;  /* MMAP_EXEC, ANON_EXEC: length */
                };
                char comm[16]; /* EXEC: the new image's name (task comm, NUL-padded) */
        };
        __u64 ktime_ns;
        /* EXEC: when the process started, CLOCK_BOOTTIME ns (what /proc/PID/stat's starttime
         * counts in clock ticks); 0: not known. With the name and mnt_ns, the daemon's first read
         * of the new image need not open /proc/PID/stat. */
        __u64 start_ns;
};
_Static_assert(sizeof(struct profd_event) == 48, "profd_event layout");

/* Per-CPU counters of bpf/events.bpf.c (map "event_counters"), exported on /metrics:
 * [PROFD_EVCNT_SENT + type] events delivered, [PROFD_EVCNT_DROPPED + type] lost because the ring
 * buffer was full. Types are < 8 (enum profd_event_type). */
#define PROFD_EVCNT_SENT 0
#define PROFD_EVCNT_DROPPED 8
#define PROFD_EVCNT_RATELIMITED 16      /* mprotect +X events not sent: same process < 100 ms ago */
#define PROFD_EVCNT_MMAP_RATELIMITED 17 /* file mapping events not sent: the process's burst used up */
/* Anonymous executable ranges not sent: the process's burst was used up / the same range was sent
 * from this CPU just before. */
#define PROFD_EVCNT_ANON_RATELIMITED 18
#define PROFD_EVCNT_ANON_DEDUPED 19
/* Events sent without waking the daemon (exits, forks sharing the parent's memory, execs whose
 * loader reports its start-up, the reports before its libraries are mapped): read with the next
 * event that wakes it, or at its periodic drain. */
#define PROFD_EVCNT_DEFERRED 20
/* Of those, execs of programs whose loader the daemon watches (watched_loaders below). */
#define PROFD_EVCNT_EXEC_DEFERRED 21
#define PROFD_EVCNT__MAX 22

/* FORK with addr PROFD_EV_FORK_SHARED_MM: the child shares its parent's memory (vfork,
 * posix_spawn: CLONE_VM without CLONE_THREAD) until it execs or exits. The unwinder uses the
 * parent's pool entries for it (same mm, same mappings), so the daemon writes none. */
#define PROFD_EV_FORK_SHARED_MM 1

/* Map "watched_loaders" of bpf/events.bpf.c: a dynamic loader file the daemon put a uprobe on, by
 * the kernel's device number (MKDEV: major << 20 | minor) and inode. The value (a __u32) is how many
 * of its start-up reports come before the program's libraries are mapped (glibc: 1, RT_ADD; musl:
 * 0). An exec of a program with such a loader does not wake the daemon, nor do those reports: the
 * next one (RT_CONSISTENT) does, and the daemon reads the new image once, libraries included. */
struct profd_loader_key {
        __u64 dev;
        __u64 inode;
};
_Static_assert(sizeof(struct profd_loader_key) == 16, "profd_loader_key layout");
/* Loader files watched at most (the daemon's MAX_LOADERS). */
#define PROFD_LOADERS_MAX 64

/* MMAP_EXEC with addr 0: "some executable file mapping is being created, address not known yet"
 * (fallback hooks that run before the mapping exists); the daemon re-reads maps a little later. */
#define PROFD_EV_ADDR_UNKNOWN 0
/* MMAP_EXEC with addr 1: the dynamic loader changed its link map (start-up done, dlopen, dlclose);
 * the mappings exist, the address is not known. Never a mapping start (those are page-aligned). */
#define PROFD_EV_ADDR_LOADER 1
