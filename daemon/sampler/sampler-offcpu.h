/* SPDX-License-Identifier: GPL-2.0-only */
/* The off-CPU programs of bpf/profile.bpf.c (sampler-offcpu.c): configured before the load,
 * attached to sched_switch with --off-cpu, left unloaded without. */
#pragma once

#include "sampler/sampler-internal.h"

/* Before profile_bpf__load(): with off-CPU off, its programs are not loaded and its maps take no
 * memory; with it on, sizes them and sets the rodata. Logs its errors. */
int sampler_offcpu_configure(Sampler *s);
/* After the load: installs the off-CPU tail-call chain. Logs its errors. */
int sampler_offcpu_install(Sampler *s);
/* Attaches the sched_switch hook (no-op without off-CPU). Logs its errors. */
int sampler_offcpu_attach(Sampler *s);
void sampler_offcpu_detach(Sampler *s);
/* Right after a cut flipped the generation: counts the part before it of every unwound wait in
 * progress into the retired generation (no-op without off-CPU or before 5.13). */
int sampler_offcpu_cut(Sampler *s);
