/* linger.h - lingering close: read and drop what a client still sends after
 * its connection's answer, so the answer reaches it.
 *
 * A server that answers before it has read the whole request (413 on the
 * Content-Length alone, 401 before the body) and then closes its socket
 * with unread bytes in it makes the kernel send a reset. The client,
 * still sending its body, sees "broken pipe" or "connection reset" instead
 * of the answer that is already on its way (RFC 9112, section 9.6). The
 * cure is to shut only the sending side, keep reading and dropping until
 * the client closes too, and only then close.
 *
 * libmicrohttpd 0.9.75 shuts the sending side and closes at once. The
 * server hands a duplicate of such a socket (dup(2), before libmicrohttpd
 * closes its own) to a lingerer: one thread ("attn-linger") that polls the
 * sockets it holds, reads whatever arrives into a scratch buffer, and
 * closes each one at end of stream, on an error, or hold_s after it came.
 * A socket held here takes no connection slot and no request memory: only
 * its file descriptor, at most max_fds of them (more are closed at once).
 */
#ifndef ATTN_LINGER_H
#define ATTN_LINGER_H

typedef struct lingerer lingerer;

/* NULL when out of memory or threads: then linger_add closes at once. */
lingerer *linger_new(int max_fds, double hold_s);

/* Take fd (its answer sent): shut its sending side, drain it, close it.
 * Safe from any thread. */
void linger_add(lingerer *l, int fd);

/* Sockets held now. */
int linger_held(lingerer *l);

/* Sockets taken so far, and how many of them were closed at once because
 * max_fds were already held. */
void linger_counts(lingerer *l, unsigned long long *taken, unsigned long long *refused);

/* Stop the thread and close what is still held. NULL is fine. */
void linger_free(lingerer *l);

#endif
