/* board.h — a worker's stats board: one fixed-size block of lock-free counters and gauges in a
 * file <stats-dir>/<label>.stats mapped MAP_SHARED, so every worker of the pool can render all of
 * them (/metrics, /health). Plain data, no pointers, no locks: a worker killed with -9 leaves
 * nothing held, and a restarted worker takes its file back (same label, counters from zero).
 *
 * Writers: the owning worker only (request threads and the engine thread, relaxed atomics).
 * Readers: any process that maps the file read-only; the header is valid once magic reads
 * BOARD_MAGIC (stored last, with release). */
#ifndef CLGEMMA_FCGI_BOARD_H
#define CLGEMMA_FCGI_BOARD_H

#include <assert.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define BOARD_MAGIC 0x31616d6d65676c63ull /* "clgemma1" */
#define BOARD_VERSION 6                   /* bump when the layout or a histogram's bounds change */

enum metric_endpoint { EP_CHAT, EP_COMPLETIONS, EP_MODELS, EP_HEALTH, EP_METRICS, EP_OTHER, EP_COUNT };
enum metric_cancel { CANCEL_CLIENT_GONE, CANCEL_DRAIN, CANCEL_REASONS };
/* 0: not initialised */
enum board_state { BOARD_LOADING = 1, BOARD_READY, BOARD_DRAINING, BOARD_FAILED };
/* the status codes counted one by one; the last slot collects the rest */
enum { BOARD_N_STATUS = 13 };
extern const int board_status_codes[BOARD_N_STATUS - 1];
/* histograms; bounds live in metrics.c's table */
enum board_hist { H_TTFT, H_ITL, H_LATENCY_CHAT, H_LATENCY_COMPLETIONS, H_QUEUE_WAIT, H_TPOT, H_COUNT };
enum { BOARD_MAX_BOUNDS = 16 };
enum { KVP_FULL, KVP_RING, KVP_POOLS };

typedef struct board_histogram {
    _Atomic uint64_t bucket[BOARD_MAX_BOUNDS + 1]; /* per bound, not cumulative; then +Inf.
                                                    * The count is their sum, so it always equals +Inf */
    _Atomic uint64_t sum_ns;
} board_histogram;

typedef struct board {
    /* header: written by the owner before magic */
    _Atomic uint64_t magic;
    uint32_t version, size;                /* BOARD_VERSION, sizeof(board) */
    int64_t pid, master_pid;
    int64_t started_ns;                    /* wall clock (CLOCK_REALTIME) */
    int32_t index;                         /* worker index under its master */
    char label[128];                       /* worker="..." label: the socket's name (+ "#index" when shared) */
    char listen[256];                      /* unix socket path or host:port */
    char device[64];                       /* --devices entry ("" = the engine's pick) */
    char model[128];
    /* once the engine is loaded: device_name valid when engine_known reads 1 (release/acquire) */
    char device_name[128];
    _Atomic uint64_t engine_known;
    _Atomic uint64_t state;                /* enum board_state */
    /* counters */
    _Atomic uint64_t requests[EP_COUNT][BOARD_N_STATUS];
    _Atomic uint64_t prompt_tokens, completion_tokens;
    _Atomic uint64_t cancels[CANCEL_REASONS];
    _Atomic uint64_t engine_errors;
    _Atomic uint64_t prefill_chunks;       /* prompt pieces fed to the engine, one per step a prompt is in */
    _Atomic uint64_t spec_steps, spec_draft_tokens, spec_accepted_tokens; /* drafts verified; their tokens; taken */
    /* gauges */
    _Atomic uint64_t active, queued;
    _Atomic uint64_t device_bytes, device_total, n_ctx;
    _Atomic uint64_t kv_blocks[KVP_POOLS], kv_free[KVP_POOLS], kv_cached[KVP_POOLS];
    /* the prefix cache: prompt tokens of the sequences started, and of them those not computed */
    _Atomic uint64_t prefix_tokens, prefix_hit_tokens;
    _Atomic uint64_t images, image_encode_us;     /* images of prompts started; the time their encodes took */
    /* the last failed load of this worker slot and how many there were since it last loaded: kept across
     * restarts (a worker that cannot load restarts with back-off, and /health must say why) */
    _Atomic uint64_t load_failures;
    char last_error[256];
    board_histogram hist[H_COUNT];
} board;

static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "64-bit atomics must be lock-free to share them between processes");

typedef struct board_id {
    char label[128], listen[256], device[64], model[128];
    int index;
} board_id;

/* The worker's name from its listening socket (getsockname works on fd 0 under spawn-fcgi too):
 * label = the unix socket's file name, or host:port; "#index" is appended when workers share the
 * socket. dir gets the unix socket's directory ("" for TCP or an abstract socket). */
void board_identify(int listen_fd, int index, int shared, board_id *id, char *dir, size_t dircap);
/* <dir>/<label>.stats with characters other than [A-Za-z0-9._:#@-] replaced by '_'; -1 if too long */
int  board_path(const char *dir, const char *label, char *out, size_t cap);

/* The owner's board: the file at path (created, or taken back from an earlier incarnation and
 * zeroed but for its load-failure record), or anonymous shared memory when path is NULL. Refuses a file that a live process
 * other than us owns. Returns NULL with err. */
board *board_create(const char *path, const board_id *id, char *err, size_t errlen);
/* A failed load recorded (err: its message) / a successful one clearing the record */
void   board_load_failed(board *b, const char *err);
void   board_loaded(board *b);
/* Unmaps; remove_path (may be NULL) is unlinked: a clean exit leaves no file behind. */
void   board_destroy(board *b, const char *remove_path);

/* ---- every board of a stats directory ---- */

typedef struct board_view {
    const board *b;
    int up;                  /* 0: its process is gone but its master lives (restarting) */
    int mapped;              /* ours to unmap (board_scan_free) */
} board_view;

/* Maps every valid *.stats in dir read-only, sorted by label. A file whose worker and master are
 * both gone is from an earlier run: skipped and unlinked. self (may be NULL) is used in place of
 * a mapping of its own file, and added if the directory did not show it. Returns the count (at
 * most cap); views must be released with board_scan_free. */
enum { BOARD_SCAN_MAX = 256 }; /* boards one scan shows at most */
int  board_scan(const char *dir, const board *self, board_view *views, int cap);
void board_scan_free(board_view *views, int n);

#endif
