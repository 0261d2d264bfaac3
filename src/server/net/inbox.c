/* The loop inbox (inbox.h). Cross-thread wake-ups cost several
 * microseconds of kernel time each on a VM, so they are spent only on a
 * loop that is really asleep: the flag is set under the same lock that
 * guards the list, after the loop saw the list empty, so a post either
 * lands before that look (the loop polls instead of sleeping) or finds
 * the flag set (and writes the eventfd). */
#include "inbox.h"

#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

int nrd_srv_inbox_init(nrd_srv_inbox *in, int epfd, void *tag) {
  in->head = in->tail = NULL;
  in->asleep = false;
  atomic_init(&in->wakers, 0);
  in->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (in->fd < 0) return -1;
  /* Edge-triggered: every write is a new event, so the counter is never
   * read (2^64 writes would be needed to fill it). */
  struct epoll_event ev = {.events = EPOLLIN | EPOLLET, .data.ptr = tag};
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, in->fd, &ev) != 0) {
    int saved = errno;
    close(in->fd);
    errno = saved;
    return -1;
  }
  pthread_mutex_init(&in->mu, NULL);
  return 0;
}

void nrd_srv_inbox_destroy(nrd_srv_inbox *in) {
  /* A poster whose item the loop already ran may still be writing. */
  while (atomic_load_explicit(&in->wakers, memory_order_acquire) != 0) sched_yield();
  close(in->fd);
  pthread_mutex_destroy(&in->mu);
}

void nrd_srv_inbox_wake(nrd_srv_inbox *in) {
  uint64_t one = 1;
  ssize_t rc;
  do rc = write(in->fd, &one, sizeof one);
  while (rc < 0 && errno == EINTR);
}

void nrd_srv_inbox_post(nrd_srv_inbox *in, nrd_srv_inbox_item *it) {
  it->next = NULL;
  pthread_mutex_lock(&in->mu);
  if (in->tail)
    in->tail->next = it;
  else
    in->head = it;
  in->tail = it;
  /* The eventfd is written after the lock is let go, so a loop woken onto
   * this CPU never finds the lock held by a preempted poster. The loop may
   * then take and run the item before the write; `wakers` keeps destroy
   * from closing the eventfd under it. */
  bool wake = in->asleep;
  in->asleep = false;
  if (wake) atomic_fetch_add_explicit(&in->wakers, 1, memory_order_relaxed);
  pthread_mutex_unlock(&in->mu);
  if (wake) {
    nrd_srv_inbox_wake(in);
    atomic_fetch_sub_explicit(&in->wakers, 1, memory_order_release);
  }
}

bool nrd_srv_inbox_idle(nrd_srv_inbox *in) {
  pthread_mutex_lock(&in->mu);
  bool idle = in->head == NULL;
  in->asleep = idle;
  pthread_mutex_unlock(&in->mu);
  return idle;
}

void nrd_srv_inbox_awake(nrd_srv_inbox *in) {
  pthread_mutex_lock(&in->mu);
  in->asleep = false;
  pthread_mutex_unlock(&in->mu);
}

bool nrd_srv_inbox_asleep(nrd_srv_inbox *in) {
  pthread_mutex_lock(&in->mu);
  bool asleep = in->asleep;
  pthread_mutex_unlock(&in->mu);
  return asleep;
}

nrd_srv_inbox_item *nrd_srv_inbox_take(nrd_srv_inbox *in) {
  pthread_mutex_lock(&in->mu);
  nrd_srv_inbox_item *it = in->head;
  in->head = in->tail = NULL;
  in->asleep = false;
  pthread_mutex_unlock(&in->mu);
  return it;
}
