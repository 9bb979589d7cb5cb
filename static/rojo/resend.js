// A chat message refused by a server that is restarting (roject/server/graceful.py: 503 with
// code `draining` and Retry-After) was stored nowhere, and the proxy sends the next request to
// another server within its health interval (deploy/Caddyfile): the page sends it again itself
// rather than hand it back to be sent by hand. Any other refusal, a 503 for an outage among
// them (it may have stored the message), is left to the caller, as before.

import { ApiError } from "./api.js";

const RESEND_MS = 30000; // how long a message is sent again for: a restart's window, with room
const LEAST_WAIT_MS = 1000; // the server's Retry-After, kept within these: no hammering a
const MOST_WAIT_MS = 5000; // draining server, and no long wait once another one answers

/** Whether `error` is a draining server's refusal, which stored nothing. */
export function drainingRefused(error) {
  return (
    error instanceof ApiError &&
    error.status === 503 &&
    error.body?.code === "draining" &&
    !error.body?.conversation
  );
}

/** The wait before sending again, in ms: the server's Retry-After, within 1-5 s. Not the
 * reconnect backoff (reconnect.js): that doubles up to 30 s, the whole time given here. */
function resendDelay(error) {
  return Math.min(Math.max(error.retryAfter * 1000, LEAST_WAIT_MS), MOST_WAIT_MS);
}

export class Resender {
  /** `log`: the chat's log, where a status line says the message is being sent again. */
  constructor(log) {
    this.log = log;
    this.stopped = false;
    this.cancelWait = null;
  }

  /** `post()`'s answer; after a draining refusal, `post()` again once its Retry-After has
   * passed, for up to 30 s. Throws the last refusal once the time is up or `stop()` came. */
  async post(post) {
    const deadline = Date.now() + RESEND_MS;
    this.stopped = false;
    let note = null;
    try {
      for (;;) {
        try {
          return await post();
        } catch (error) {
          const delay = drainingRefused(error) ? resendDelay(error) : null;
          if (delay === null || this.stopped || Date.now() + delay > deadline) throw error;
          note ??= this.log.addNotice("The server is restarting; sending your message again…", "resending");
          if (!(await this.wait(delay))) throw error;
        }
      }
    } finally {
      note?.remove();
    }
  }

  /** Wait `ms`; false if stopped meanwhile. */
  wait(ms) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(true), ms);
      this.cancelWait = () => {
        clearTimeout(timer);
        resolve(false);
      };
    }).finally(() => {
      this.cancelWait = null;
    });
  }

  /** Send nothing again (Stop): a wait under way ends at once, and so does a try under way
   * that is refused; its refusal goes to the caller. */
  stop() {
    this.stopped = true;
    this.cancelWait?.();
  }
}
