/*
 * answer.c - a weir receiver's answer to its sender, once every output is
 * done, and its way home: waiting for the sender's word that it read it,
 * taking back a sender that lost it, giving it again.  See receiver.h.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>

#include "base/sync.h"
#include "link/receiver.h"
#include "link/stripe.h"

/* How long a sender has to come back for its answer (or to say it read it). */
static double answer_window(const struct receiver *r)
{
    return r->own.reconnect < RECEIVER_HOME_SECS ? r->own.reconnect : RECEIVER_HOME_SECS;
}

/* Whether this answer is home only on the sender's word: a success of a
 * whole stream, to a sender that will say it read it.  A failure keeps the
 * host's acknowledgement: a sender that rejects an answer says nothing, and
 * one that lost a failure fails all the same. */
static bool waits_for_word(const struct receiver *r, const struct receiver_verdict *v)
{
    return r->answer_word && v->whole;
}

/* What an answer waits for after it went (session.h): such a sender gets
 * one window from the first answer, on its connection and, through a knock
 * on the kept port, on the one it comes back on.  NULL: the plain drain. */
static const struct answer_wait *answer_wait(struct receiver *r,
                                             const struct receiver_verdict *v,
                                             struct answer_wait *w)
{
    if (!waits_for_word(r, v))
        return NULL;
    if (r->answer_until == 0)
        r->answer_until = clock_now() + answer_window(r);
    w->knock_fd = r->answer_home ? r->listener.fd : -1;
    w->until = r->answer_until;
    return w;
}

bool receiver_answer(struct receiver *r, const struct receiver_verdict *v, atomic_bool *halt)
{
    struct answer_wait w;
    /* spread, the first connection is the answer's alone from here on: what
     * the sender says after it ('D') is read there, by the drain */
    stripe_hush(r->own.in);
    return session_answer(&r->back, v->code, v->bytes, v->chain, v->msg,
                          answer_wait(r, v, &w), halt) == 0;
}

/* No sender can come back for the answer any more. */
static void home_closed(struct receiver *r)
{
    tcp_listener_close(&r->listener);
    OPENSSL_cleanse(r->token, sizeof r->token);
}

void receiver_hold_for_answer(struct receiver *r, atomic_bool *stop)
{
    double window = answer_window(r);
    char name[sizeof r->own.in->name];
    snprintf(name, sizeof name, "%s", r->own.in->name);
    log_msg(r->own.log, LOG_WARN, "%s: the connection broke after the whole stream arrived; "
            "waiting up to %g s for the sender to come back for the answer", name, window);
    struct weir_error e;
    if (receiver_readmit(r, 0, window, stop, &e) != 0) {
        if (!atomic_load(stop))
            log_msg(r->own.log, LOG_WARN, "%s: the sender did not come back for the answer "
                    "(%s)", r->listener.addr, e.msg);
        sync_lock(r->own.lock);
        r->answer_home = false;
        sync_unlock(r->own.lock);
        home_closed(r);
        return;
    }
    /* it was told everything is held: it resends nothing and waits for the answer */
    log_msg(r->own.log, LOG_WARN, "%s: the sender came back; it has the answer once the "
            "outputs are done", r->own.in->name);
}

/* Whether the answer just sent reached the sender.  A sender that offered
 * CODEC_FEATURE_ANSWER_READ says so itself ('D', read by session_answer's
 * drain): nothing else counts, since a relay between the two acknowledges
 * the answer for it and may still lose it.  For an older sender, its TCP's
 * acknowledgement.  halt ends the wait. */
static bool answer_reached(struct receiver *r, const struct receiver_verdict *v,
                             atomic_bool *halt)
{
    if (waits_for_word(r, v))
        return r->back.answer_read;
    return receiver_answer_acked(r->own.in, halt);
}

/* Why the answer may be lost, in words. */
static const char *answer_doubt(const struct receiver *r, const struct receiver_verdict *v,
                                bool sent)
{
    if (!sent)
        return "the connection broke before the sender had the answer";
    if (waits_for_word(r, v))
        return "the sender has not said that it read the answer";
    return "the answer was not acknowledged within 5 s, and may not have reached the sender";
}

void receiver_answer_home(struct receiver *r, bool sent, const struct receiver_verdict *v,
                          atomic_bool *halt)
{
    if (!r->answer_home)
        return;
    r->answer_home = false;
    /* only an answer the sender can still want: success, or this end's
     * outputs failing; not a stop (a signal here, the sender's abort, its
     * weir gone) */
    if (!v->wanted)
        goto done;
    double window = answer_window(r);
    double deadline = r->answer_until;   /* a sender's word: one window from the answer */
    bool back = false;   /* a connection it came back on */
    while (!(sent && answer_reached(r, v, halt)) && !atomic_load(halt)) {
        /* a break, or silence: the answer may be lost on the way.  The
         * sender comes back for it; each of its connections is given it
         * again, within one window from the first break */
        if (deadline == 0)
            deadline = clock_now() + window;
        double left = deadline - clock_now();
        log_msg(r->own.log, LOG_WARN, "%s: %s; waiting up to %.3g s for it to come back for it",
                r->own.in->name, answer_doubt(r, v, sent), left > 0 ? left : 0);
        struct weir_error e;
        /* the engine's stop is set by now: this has its own bound, and halt */
        if (left <= 0 || receiver_readmit(r, 0, left, halt, &e) != 0) {
            if (!atomic_load(halt))
                log_msg(r->own.log, LOG_WARN, "%s: the sender did not come back for the "
                        "answer (%s)", r->listener.addr, left <= 0 ? "no time left" : e.msg);
            goto done;
        }
        /* it was told everything is held: it resends nothing and waits for this */
        sync_lock(r->own.lock);
        sent = receiver_answer(r, v, halt);
        sync_unlock(r->own.lock);
        back = true;
    }
    if (back && !atomic_load(halt))
        log_msg(r->own.log, LOG_WARN, "%s: the sender came back for the answer",
                r->own.in->name);
done:
    home_closed(r);
}
