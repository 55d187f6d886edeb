// sqlite3 for the on-disk search cache. Only GitHubLive imports this module.
#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>
/// SQLITE_TRANSIENT is a macro Swift cannot import.
static inline void (*csqlite_transient(void))(void *) { return SQLITE_TRANSIENT; }
#endif
