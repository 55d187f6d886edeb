// Linux epoll and timerfd for LoadKit's load loop. Only LoadKit imports this module.
//
// Swift's Glibc module does not include <sys/epoll.h> or <sys/timerfd.h>, and `struct epoll_event` is
// packed on x86_64 (12 bytes) but not elsewhere (16): the helpers below let the C compiler do the
// layout, so Swift sees an opaque byte buffer and plain integers.
#ifndef CEPOLL_SHIM_H
#define CEPOLL_SHIM_H
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>

static const uint32_t cepoll_in = EPOLLIN;
static const uint32_t cepoll_out = EPOLLOUT;
static const uint32_t cepoll_err = EPOLLERR;
static const uint32_t cepoll_hup = EPOLLHUP;
static const uint32_t cepoll_rdhup = EPOLLRDHUP;
static const uint32_t cepoll_et = EPOLLET;
static const int cepoll_ctl_add = EPOLL_CTL_ADD;
static const int cepoll_ctl_del = EPOLL_CTL_DEL;

/// The size of one `struct epoll_event` (a buffer for `cepoll_wait` holds a whole number of them).
static inline int cepoll_event_size(void) { return (int)sizeof(struct epoll_event); }

/// `epoll_create1(EPOLL_CLOEXEC)`.
static inline int cepoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/// `epoll_ctl` for `fd` with `events`, the fd itself as the event's data.
static inline int cepoll_ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event event = {0};
    event.events = events;
    event.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &event);
}

/// `epoll_wait` into `buffer` (room for `capacity` events).
static inline int cepoll_wait(int epfd, void *buffer, int capacity, int timeout_ms) {
    return epoll_wait(epfd, (struct epoll_event *)buffer, capacity, timeout_ms);
}

/// The events and fd of the `index`th event in a buffer filled by `cepoll_wait`.
static inline uint32_t cepoll_event_at(const void *buffer, int index, int *fd) {
    const struct epoll_event *event = (const struct epoll_event *)buffer + index;
    *fd = event->data.fd;
    return event->events;
}

/// `timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC)`.
static inline int cepoll_timer_create(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

/// Arms `fd` to fire once at `deadline` (absolute CLOCK_MONOTONIC nanoseconds; 0 would disarm it, so
/// at least 1).
static inline int cepoll_timer_arm(int fd, uint64_t deadline) {
    struct itimerspec spec = {0};
    if (deadline == 0) deadline = 1;
    spec.it_value.tv_sec = (time_t)(deadline / 1000000000u);
    spec.it_value.tv_nsec = (long)(deadline % 1000000000u);
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL);
}
#endif
