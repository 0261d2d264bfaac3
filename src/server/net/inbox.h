/* A loop's inbox: work that other threads (core callbacks, load jobs) hand
 * to one epoll loop thread, and the eventfd that wakes that loop. Only a
 * loop that found its inbox empty and went to sleep is woken, once; an
 * awake loop looks at the inbox before it sleeps again. Both front ends
 * (HTTP and gRPC) use it. */
#ifndef NRD_SRV_INBOX_H
#define NRD_SRV_INBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Embed as the first member of whatever is posted; the inbox never owns
 * or frees items. */
typedef struct nrd_srv_inbox_item {
  struct nrd_srv_inbox_item *next;
} nrd_srv_inbox_item;

typedef struct nrd_srv_inbox {
  pthread_mutex_t mu; /* guards head, tail and asleep */
  nrd_srv_inbox_item *head, *tail;
  bool asleep; /* the loop found no items and is (about to be) in epoll_wait */
  int fd; /* eventfd, edge-triggered in the loop's epoll set; never read */
  atomic_int wakers; /* posters between their unlock and the end of their eventfd write */
} nrd_srv_inbox;

/* Creates the eventfd and adds it to epfd with data.ptr = tag. 0, or -1
 * with errno set (the inbox then needs no destroy). Loop setup. */
int nrd_srv_inbox_init(nrd_srv_inbox *in, int epfd, void *tag);

/* Closes the eventfd, first waiting for posters still writing it (a
 * post's item may be run before its post returns). Items still queued are
 * the caller's (take them first). After the loop thread has exited and no
 * new post can start. */
void nrd_srv_inbox_destroy(nrd_srv_inbox *in);

/* Queues it (borrowed until the loop takes it) and wakes the loop if it
 * sleeps. The loop may take and run the item before this returns; the
 * post's last touch of the inbox is covered by destroy. Any thread. */
void nrd_srv_inbox_post(nrd_srv_inbox *in, nrd_srv_inbox_item *it);

/* Wakes the loop whatever it is doing (stop requests). Any thread. */
void nrd_srv_inbox_wake(nrd_srv_inbox *in);

/* Right before epoll_wait: true when the inbox is empty, and then marks
 * the loop asleep so the next post wakes it (wait with a timeout); false
 * when items wait (poll without blocking). Loop thread only. */
bool nrd_srv_inbox_idle(nrd_srv_inbox *in);

/* Right after epoll_wait: marks the loop awake, so that what is posted
 * while it works (by itself too, when a model runs inline on it) costs no
 * eventfd write; it looks at the inbox before it sleeps again. Loop
 * thread only. */
void nrd_srv_inbox_awake(nrd_srv_inbox *in);

/* True when the loop is (about to be) in epoll_wait with nothing queued:
 * a post now would cost a wake-up. A hint, stale as soon as it returns.
 * Any thread. */
bool nrd_srv_inbox_asleep(nrd_srv_inbox *in);

/* Takes every queued item, oldest first (NULL when none), and marks the
 * loop awake. Loop thread only. */
nrd_srv_inbox_item *nrd_srv_inbox_take(nrd_srv_inbox *in);

#endif
