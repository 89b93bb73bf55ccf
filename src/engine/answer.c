/*
 * answer.c - the answer to a weir sender, once every output is done, and
 * its way home: waiting for the sender's word that it read it, taking
 * back a sender that lost it, giving it again.  See reader_int.h.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/sync.h"
#include "format/codec.h"
#include "format/decode.h"
#include "format/sparse.h"
#include "link/listener.h"
#include "link/receiver.h"
#include "linktest/linktest.h"

#include "engine/reader_int.h"

#define ANSWER_HOME_SECS 30.0   /* for it to come back for the answer, at most */

/* How long a sender has to come back for its answer (or to say it read it). */
static double answer_window(const struct pipeline *p)
{
    return p->cfg->reconnect < ANSWER_HOME_SECS ? p->cfg->reconnect : ANSWER_HOME_SECS;
}

/* Whether this answer is home only on the sender's word: a success of a
 * whole stream, to a sender that will say it read it.  A failure keeps the
 * host's acknowledgement: a sender that rejects an answer says nothing, and
 * one that lost a failure fails all the same. */
static bool waits_for_word(const struct pipeline *p)
{
    return p->answer_word && p->stream_whole && !p->failed;
}

/* What an answer waits for after it went (session.h): such a sender gets
 * one window from the first answer, on its connection and, through a knock
 * on the kept port, on the one it comes back on.  NULL: the plain drain. */
static const struct answer_wait *answer_wait(struct pipeline *p, struct answer_wait *w)
{
    if (!waits_for_word(p))
        return NULL;
    if (p->answer_until == 0)
        p->answer_until = clock_now() + answer_window(p);
    w->knock_fd = p->answer_home ? p->listener.fd : -1;
    w->until = p->answer_until;
    return w;
}

bool reader_answer(struct pipeline *p, int code, const char *msg, atomic_bool *halt)
{
    struct answer_wait w;
    return session_answer(&p->back, code, p->data_bytes, p->stream_chain, msg,
                          answer_wait(p, &w), halt) == 0;
}

/* The connection broke once the whole stream was in, and the outputs (a
 * consumer committing it) may take longer than the sender's --reconnect:
 * take the sender back now, on the reader's thread, with the ring already
 * finished, so that it is greeted, told the whole stream is held, and kept
 * informed by the keepalives until the answer.  A sender that does not
 * come back gets no answer: the outputs are whole all the same. */
void take_back_for_answer(struct pipeline *p)
{
    double window = answer_window(p);
    char name[sizeof p->in.name];
    snprintf(name, sizeof name, "%s", p->in.name);
    log_msg(p->log, LOG_WARN, "%s: the connection broke after the whole stream arrived; "
            "waiting up to %g s for the sender to come back for the answer", name, window);
    struct weir_error e;
    if (readmit(p, 0, window, &p->stop, &e) != 0) {
        if (!atomic_load(&p->stop))
            log_msg(p->log, LOG_WARN, "%s: the sender did not come back for the answer (%s)",
                    p->listener.addr, e.msg);
        sync_lock(&p->lock);
        p->answer_home = false;
        sync_unlock(&p->lock);
        tcp_listener_close(&p->listener);
        OPENSSL_cleanse(p->token, sizeof p->token);
        return;
    }
    /* it was told everything is held: it resends nothing and waits for the answer */
    log_msg(p->log, LOG_WARN, "%s: the sender came back; it has the answer once the outputs "
            "are done", p->in.name);
}

/* Whether the answer just sent reached the sender.  A sender that offered
 * CODEC_FEATURE_ANSWER_READ says so itself ('D', read by session_answer's
 * drain): nothing else counts, since a relay between the two acknowledges
 * the answer for it and may still lose it.  For an older sender, its TCP's
 * acknowledgement (link/receiver.h).  halt ends the wait. */
static bool answer_delivered(struct pipeline *p, atomic_bool *halt)
{
    if (waits_for_word(p))
        return p->back.answer_read;
    return receiver_answer_acked(&p->in, halt);
}

void reader_answer_home(struct pipeline *p, bool sent, int code, const char *msg,
                        atomic_bool *halt)
{
    if (!p->answer_home)
        return;
    p->answer_home = false;
    /* only an answer the sender can still want: success, or this end's
     * outputs failing; not a stop (a signal here, the sender's abort, its
     * weir gone) */
    if (p->failed && p->first.status != WEIR_EXIT_OUTPUT)
        goto done;
    double window = answer_window(p);
    double deadline = p->answer_until;   /* a sender's word: one window from the answer */
    bool back = false;   /* a connection it came back on */
    while (!(sent && answer_delivered(p, halt)) && !atomic_load(halt)) {
        /* a break, or silence: the answer may be lost on the way.  The
         * sender comes back for it; each of its connections is given it
         * again, within one window from the first break */
        if (deadline == 0)
            deadline = clock_now() + window;
        double left = deadline - clock_now();
        log_msg(p->log, LOG_WARN, "%s: %s; waiting up to %.3g s for it to come back for it",
                p->in.name, !sent ? "the connection broke before the sender had the answer"
                            : waits_for_word(p) ? "the sender has not said that it read the answer"
                                             : "the answer was not acknowledged within 5 s, and "
                                               "may not have reached the sender",
                left > 0 ? left : 0);
        struct weir_error e;
        /* the engine's stop is set by now: this has its own bound, and halt */
        if (left <= 0 || readmit(p, 0, left, halt, &e) != 0) {
            if (!atomic_load(halt))
                log_msg(p->log, LOG_WARN, "%s: the sender did not come back for the answer "
                        "(%s)", p->listener.addr, left <= 0 ? "no time left" : e.msg);
            goto done;
        }
        /* it was told everything is held: it resends nothing and waits for this */
        sync_lock(&p->lock);
        sent = reader_answer(p, code, msg, halt);
        sync_unlock(&p->lock);
        back = true;
    }
    if (back && !atomic_load(halt))
        log_msg(p->log, LOG_WARN, "%s: the sender came back for the answer", p->in.name);
done:
    tcp_listener_close(&p->listener);
    OPENSSL_cleanse(p->token, sizeof p->token);
}
