// posix_spawn's "close every descriptor from N" action for the test support's process runner
// (RedisTestSupport's `Spawn`). Only RedisTestSupport imports this module.
//
// glibc (2.34+) declares posix_spawn_file_actions_addclosefrom_np and pipe2 only under _GNU_SOURCE, which Swift's
// Glibc module is not built with; they are declared again here (the same prototypes) so Swift can call them.
#ifndef CSPAWN_SHIM_H
#define CSPAWN_SHIM_H
#include <fcntl.h>
#include <spawn.h>

extern int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
extern int pipe2(int pipefd[2], int flags);

/// A pipe whose two ends are close-on-exec from the start (no other thread's spawn can inherit them).
static inline int cspawn_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

/// The child closes every descriptor >= `from` before it runs (after the earlier dup2 actions).
static inline int cspawn_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
#endif
