/* SPDX-License-Identifier: GPL-2.0-only */
/* The life of a profile request once it holds a slot: the cuts that start and end its window, the
 * wait for the window's samples to be drained, the build step by step, and the answer (or its
 * cancellation when the client leaves). */
#pragma once

#include <stdint.h>

#include "util/macro.h"

typedef struct HttpServer HttpServer;
typedef struct Request Request;

/* For the asynchronous path: remember the answer, then resume so the handler queues it. */
void http_request_set_error(Request *req, unsigned status, const char *fmt, ...) _printf_(3, 4);

void profile_release_slot(Request *req);
void profile_stop_work(Request *req);
/* The answer is known (req->status and body): stop the work, resume the connection, let MHD run. */
void profile_finish(Request *req);
/* The client of a parked profile request went away: free its slot and stop its work now. */
void profile_request_cancel(Request *req);
/* Before refusing a profile request for want of a slot: cancels parked requests whose client has
 * left but whose hangup has not been dispatched yet. */
void profile_reap_gone(HttpServer *s);

/* Starts the window (REQUEST_START) or ends it (REQUEST_END) at a fresh cut. */
void profile_cut(Request *req);
/* aggregator_wait_for() callback of a past window: its end is drained, build it. */
void profile_on_past_drained(void *userdata);
