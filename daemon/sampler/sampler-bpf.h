/* SPDX-License-Identifier: GPL-2.0-only */
/* Loading bpf/profile.bpf.c and attaching it to every online CPU (sampler-bpf.c). */
#pragma once

#include <stdint.h>
#include <systemd/sd-event.h>

#include "sampler/sampler.h"

/* Opens the BPF object, sizes its maps for the kernel and the sampling rate, loads it and installs
 * the tail-call programs. Logs its errors. */
int sampler_load(Sampler *s);
/* Attaches the exec hook and a cpu-clock perf event on every online CPU. Logs its errors. */
int sampler_attach(Sampler *s);
void sampler_detach(Sampler *s);
/* Timer: attaches CPUs that came (back) online since the last check; re-arms itself. */
int sampler_on_hotplug_timer(sd_event_source *src, uint64_t usec, void *userdata);
