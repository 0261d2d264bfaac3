/* Unit tests for the loops' inbox (src/server/net/inbox.c): order, and that
 * the eventfd is written for a sleeping loop only. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "inbox.h"

typedef struct item {
  nrd_srv_inbox_item link;
  int value;
} item;

static int tag;

/* Events epoll reports for the inbox within timeout_ms. */
static int wake_events(int epfd, int timeout_ms) {
  struct epoll_event ev;
  int n = epoll_wait(epfd, &ev, 1, timeout_ms);
  cr_assert(n == 0 || ev.data.ptr == &tag);
  return n;
}

Test(inbox, takes_items_in_posting_order) {
  int epfd = epoll_create1(0);
  nrd_srv_inbox in;
  cr_assert_eq(nrd_srv_inbox_init(&in, epfd, &tag), 0);
  cr_assert_null(nrd_srv_inbox_take(&in));
  item items[5];
  for (int i = 0; i < 5; i++) {
    items[i].value = i;
    nrd_srv_inbox_post(&in, &items[i].link);
  }
  int expect = 0;
  for (nrd_srv_inbox_item *it = nrd_srv_inbox_take(&in); it; it = it->next) cr_assert_eq(((item *)it)->value, expect++);
  cr_assert_eq(expect, 5);
  cr_assert_null(nrd_srv_inbox_take(&in), "taking empties the inbox");
  nrd_srv_inbox_destroy(&in);
  close(epfd);
}

Test(inbox, wakes_a_sleeping_loop_once_and_an_awake_one_never) {
  int epfd = epoll_create1(0);
  nrd_srv_inbox in;
  cr_assert_eq(nrd_srv_inbox_init(&in, epfd, &tag), 0);
  item a = {.value = 1}, b = {.value = 2};

  /* Awake (never said idle): posts queue without a wake-up. */
  nrd_srv_inbox_post(&in, &a.link);
  cr_assert_eq(wake_events(epfd, 0), 0);
  /* Items waiting: the loop must not sleep. */
  cr_assert_not(nrd_srv_inbox_idle(&in));
  cr_assert_eq(nrd_srv_inbox_take(&in), &a.link);

  /* Asleep: the first post wakes it, the second does not again. */
  cr_assert(nrd_srv_inbox_idle(&in));
  nrd_srv_inbox_post(&in, &a.link);
  nrd_srv_inbox_post(&in, &b.link);
  cr_assert_eq(wake_events(epfd, 0), 1);
  cr_assert_eq(wake_events(epfd, 0), 0, "one eventfd write for two posts");
  nrd_srv_inbox_item *it = nrd_srv_inbox_take(&in);
  cr_assert(it == &a.link && it->next == &b.link);

  /* An explicit wake always reaches the loop. */
  nrd_srv_inbox_wake(&in);
  cr_assert_eq(wake_events(epfd, 0), 1);
  nrd_srv_inbox_destroy(&in);
  close(epfd);
}

Test(inbox, a_loop_back_from_epoll_wait_is_awake) {
  int epfd = epoll_create1(0);
  nrd_srv_inbox in;
  cr_assert_eq(nrd_srv_inbox_init(&in, epfd, &tag), 0);
  item a = {.value = 1};
  /* Asleep, then woken by a socket: what it posts while handling that
   * (a reply of a model run inline on it) must not write the eventfd. */
  cr_assert(nrd_srv_inbox_idle(&in));
  nrd_srv_inbox_awake(&in);
  cr_assert_not(nrd_srv_inbox_asleep(&in));
  nrd_srv_inbox_post(&in, &a.link);
  cr_assert_eq(wake_events(epfd, 0), 0, "a post to an awake loop wrote the eventfd");
  cr_assert_not(nrd_srv_inbox_idle(&in), "the item is still seen before sleeping");
  cr_assert_eq(nrd_srv_inbox_take(&in), &a.link);
  nrd_srv_inbox_destroy(&in);
  close(epfd);
}

typedef struct {
  nrd_srv_inbox *in;
  item *items;
  int n;
} poster;

static void *post_all(void *arg) {
  poster *p = arg;
  for (int i = 0; i < p->n; i++) nrd_srv_inbox_post(p->in, &p->items[i].link);
  return NULL;
}

/* A loop that sleeps only when idle() says so, with no timeout, must see
 * every item another thread posts: a lost wake-up would hang here. */
Test(inbox, a_loop_sleeping_without_timeout_sees_every_post, .timeout = 20) {
  enum { N = 20000 };
  int epfd = epoll_create1(0);
  nrd_srv_inbox in;
  cr_assert_eq(nrd_srv_inbox_init(&in, epfd, &tag), 0);
  static item items[N];
  poster p = {&in, items, N};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, post_all, &p), 0);
  int seen = 0;
  while (seen < N) {
    bool idle = nrd_srv_inbox_idle(&in);
    wake_events(epfd, idle ? -1 : 0);
    for (nrd_srv_inbox_item *it = nrd_srv_inbox_take(&in); it; it = it->next) seen++;
  }
  pthread_join(t, NULL);
  cr_assert_eq(seen, N);
  nrd_srv_inbox_destroy(&in);
  close(epfd);
}

/* Shutdown frees a loop's inbox once the loop has run every item, while
 * the thread that posted the last one may still be writing the eventfd
 * (the write comes after the unlock). Destroy must wait for it: here the
 * inbox is destroyed and freed right after the item is taken, the poster
 * not yet joined. Without the wait, ASan can see the poster read freed
 * memory, and the TSan build (NRD_TSAN) reports its write racing with the
 * close every run. */
Test(inbox, destroy_waits_for_a_poster_still_writing, .timeout = 20) {
  for (int round = 0; round < 200; round++) {
    int epfd = epoll_create1(0);
    nrd_srv_inbox *in = malloc(sizeof *in);
    cr_assert_not_null(in);
    cr_assert_eq(nrd_srv_inbox_init(in, epfd, &tag), 0);
    static item one;
    poster p = {in, &one, 1};
    pthread_t t;
    cr_assert(nrd_srv_inbox_idle(in));
    cr_assert_eq(pthread_create(&t, NULL, post_all, &p), 0);
    while (nrd_srv_inbox_idle(in)) sched_yield(); /* asleep until the item is there */
    cr_assert_eq(nrd_srv_inbox_take(in), &one.link);
    nrd_srv_inbox_destroy(in);
    free(in);
    pthread_join(t, NULL);
    close(epfd);
  }
}

Test(inbox, says_asleep_only_between_idle_and_the_next_post_or_take) {
  int epfd = epoll_create1(0);
  nrd_srv_inbox in;
  cr_assert_eq(nrd_srv_inbox_init(&in, epfd, &tag), 0);
  item a = {.value = 1};
  cr_assert_not(nrd_srv_inbox_asleep(&in), "a new loop is awake");
  cr_assert(nrd_srv_inbox_idle(&in));
  cr_assert(nrd_srv_inbox_asleep(&in), "idle with nothing queued: asleep");
  nrd_srv_inbox_post(&in, &a.link);
  cr_assert_not(nrd_srv_inbox_asleep(&in), "a post wakes it");
  cr_assert_not(nrd_srv_inbox_idle(&in), "an item waits: it must not sleep");
  cr_assert_not(nrd_srv_inbox_asleep(&in));
  cr_assert_eq(nrd_srv_inbox_take(&in), &a.link);
  cr_assert(nrd_srv_inbox_idle(&in));
  cr_assert(nrd_srv_inbox_asleep(&in));
  cr_assert_null(nrd_srv_inbox_take(&in));
  cr_assert_not(nrd_srv_inbox_asleep(&in), "taking marks it awake");
  nrd_srv_inbox_destroy(&in);
  close(epfd);
}
