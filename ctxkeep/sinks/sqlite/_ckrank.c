/*
** ck_bm25: an FTS5 auxiliary function giving the same values as FTS5's built-in
** bm25() (SQLite's ext/fts5/fts5_aux.c: k1 = 1.2, b = 0.75, column weights, IDF
** clamped to 1e-6, the score negated), whose per-phrase document counts (the IDF's
** nHit, a walk of the phrase's whole posting list through xQueryPhrase) are kept in a
** per-connection cache between statements.
**
**   ck_bm25(fts, 'table', key, w0, w1, ...)
**
** 'table' names the FTS5 table, key is a text naming the phrases of the MATCH: the
** MATCH expression itself (phrase i is cached under (table, key, i)), or, when it
** holds exactly xPhraseCount - 1 unit separators (0x1f), one key per phrase (each
** cached under (table, that part)). A NULL key: no cache (bm25() exactly). The cache
** is valid while the database's data version (SQLITE_FCNTL_DATA_VERSION: every commit
** of any connection, this one's included) is the one it was filled under; otherwise it
** is emptied first. Inside an explicit transaction (own uncommitted changes) nothing is
** cached or read from the cache. A phrase is counted at the first row that needs its
** IDF (below: never, for a zero-weight column's phrase). The counts are FTS5's own (the
** same walk), so the ranks equal bm25()'s bit for bit.
**
**   ck_bm25_top(fts, 'table', key, k, w0, w1, ...)
**
** The same values for the rows that can be among the k best of the statement (the
** top k a caller's ORDER BY rank LIMIT k takes). A row whose score cannot reach the
** k-th best score seen so far, even at its least length, is given that bound (negated)
** without reading its length (xColumnSize: a seek into %_docsize, ~80 % of ranking a
** row; the row's least length is known from its instances' offsets): strictly worse
** than the k-th best, it stays out of the top k, whose values are exact (row_bound).
**
** No SQLite is linked: every sqlite3_* function is resolved with dlsym through the
** handle of the module that already loaded SQLite (Python's _sqlite3), so this runs
** on the same SQLite instance that owns the connection (ck_init).
**
** The declarations below are those of SQLite's public headers sqlite3.h and fts5.h
** (public domain), reduced to what is used here.
*/
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
typedef struct sqlite3_context sqlite3_context;
typedef struct sqlite3_value sqlite3_value;
typedef long long sqlite3_int64;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_NULL 5
#define SQLITE_NOMEM 7
#define SQLITE_FCNTL_DATA_VERSION 35

typedef struct Fts5ExtensionApi Fts5ExtensionApi;
typedef struct Fts5Context Fts5Context;
typedef struct Fts5PhraseIter {
  const unsigned char *a;
  const unsigned char *b;
} Fts5PhraseIter;
typedef void (*fts5_extension_function)(const Fts5ExtensionApi *, Fts5Context *,
                                        sqlite3_context *, int, sqlite3_value **);
struct Fts5ExtensionApi {
  int iVersion;
  void *(*xUserData)(Fts5Context *);
  int (*xColumnCount)(Fts5Context *);
  int (*xRowCount)(Fts5Context *, sqlite3_int64 *);
  int (*xColumnTotalSize)(Fts5Context *, int, sqlite3_int64 *);
  int (*xTokenize)(Fts5Context *, const char *, int, void *,
                   int (*)(void *, int, const char *, int, int, int));
  int (*xPhraseCount)(Fts5Context *);
  int (*xPhraseSize)(Fts5Context *, int);
  int (*xInstCount)(Fts5Context *, int *);
  int (*xInst)(Fts5Context *, int, int *, int *, int *);
  sqlite3_int64 (*xRowid)(Fts5Context *);
  int (*xColumnText)(Fts5Context *, int, const char **, int *);
  int (*xColumnSize)(Fts5Context *, int, int *);
  int (*xQueryPhrase)(Fts5Context *, int, void *,
                      int (*)(const Fts5ExtensionApi *, Fts5Context *, void *));
  int (*xSetAuxdata)(Fts5Context *, void *, void (*)(void *));
  void *(*xGetAuxdata)(Fts5Context *, int);
  /* later members are not used */
};
typedef struct fts5_api fts5_api;
struct fts5_api {
  int iVersion;
  int (*xCreateTokenizer)(fts5_api *, const char *, void *, void *, void (*)(void *));
  int (*xFindTokenizer)(fts5_api *, const char *, void **, void *);
  int (*xCreateFunction)(fts5_api *, const char *, void *, fts5_extension_function,
                         void (*)(void *));
};

/* ------------------------------------------------ SQLite, resolved at ck_init */
static struct {
  int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
  int (*bind_pointer)(sqlite3_stmt *, int, void *, const char *, void (*)(void *));
  int (*step)(sqlite3_stmt *);
  int (*finalize)(sqlite3_stmt *);
  double (*value_double)(sqlite3_value *);
  const unsigned char *(*value_text)(sqlite3_value *);
  int (*value_bytes)(sqlite3_value *);
  int (*value_type)(sqlite3_value *);
  void (*result_double)(sqlite3_context *, double);
  void (*result_error_code)(sqlite3_context *, int);
  int (*file_control)(sqlite3 *, const char *, int, void *);
  int (*get_autocommit)(sqlite3 *);
  int (*limit)(sqlite3 *, int, int);
  int (*libversion_number)(void);
} S;
static int g_ready = 0;

/* 1 when every function was found (SQLite >= 3.20 for sqlite3_bind_pointer), else 0 */
int ck_init(void *handle) {
  void *h = handle ? handle : RTLD_DEFAULT;
#define R(f, n)                                   \
  *(void **)(&S.f) = dlsym(h, "sqlite3_" n);      \
  if (!S.f) return 0;
  R(prepare_v2, "prepare_v2")
  R(bind_pointer, "bind_pointer")
  R(step, "step")
  R(finalize, "finalize")
  R(value_double, "value_double")
  R(value_text, "value_text")
  R(value_bytes, "value_bytes")
  R(value_type, "value_type")
  R(result_double, "result_double")
  R(result_error_code, "result_error_code")
  R(file_control, "file_control")
  R(get_autocommit, "get_autocommit")
  R(limit, "limit")
  R(libversion_number, "libversion_number")
#undef R
  g_ready = 1;
  return 1;
}

int ck_libversion(void) { return g_ready ? S.libversion_number() : 0; }

/* sqlite3_limit(db, id, -1): the current limit (reads only), for the caller to check
** that db is the connection it means (it sets a limit of its own first) */
int ck_limit(sqlite3 *db, int id) { return g_ready ? S.limit(db, id, -1) : -1; }

/* ------------------------------------------------ the per-connection cache */
typedef struct Entry {
  struct Entry *next;
  uint64_t hash;
  sqlite3_int64 nHit;
  int n;           /* bytes of key */
  char key[];      /* table, 0x1e, key[, 0x1e, phrase index] */
} Entry;

#define NBUCKET 4096
#define MAX_ENTRIES 50000

typedef struct Cache {
  sqlite3 *db;
  struct Cache *nextConn; /* the registry of connections holding ck_bm25 */
  unsigned int dataVersion;
  int valid;
  unsigned int epoch;
  int nEntry;
  sqlite3_int64 hits, misses;
  sqlite3_int64 ranked, pruned; /* ck_bm25_top's rows: lengths read, rows bounded */
  int broken;                   /* ck_bm25_top not registered: not ready (ck_registered) */
  Entry *buckets[NBUCKET];
} Cache;

static Cache *g_registry = 0; /* the list of registered connections, under g_lock */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int g_epoch = 0; /* ck_clear_all's count */

static void cache_clear(Cache *c) {
  for (int i = 0; i < NBUCKET; i++) {
    Entry *e = c->buckets[i];
    while (e) {
      Entry *n = e->next;
      free(e);
      e = n;
    }
    c->buckets[i] = 0;
  }
  c->nEntry = 0;
}

static void cache_destroy(void *p) {
  Cache *c = (Cache *)p;
  pthread_mutex_lock(&g_lock);
  Cache **pp = &g_registry;
  while (*pp && *pp != c) pp = &(*pp)->nextConn;
  if (*pp) *pp = c->nextConn;
  pthread_mutex_unlock(&g_lock);
  cache_clear(c);
  free(c);
}

static uint64_t fnv(const char *s, int n) {
  uint64_t h = 1469598103934665603ULL;
  for (int i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ULL;
  }
  return h;
}

static Entry *cache_find(Cache *c, const char *k, int n, uint64_t h) {
  for (Entry *e = c->buckets[h % NBUCKET]; e; e = e->next)
    if (e->hash == h && e->n == n && memcmp(e->key, k, n) == 0) return e;
  return 0;
}

static void cache_put(Cache *c, const char *k, int n, uint64_t h, sqlite3_int64 nHit) {
  if (c->nEntry >= MAX_ENTRIES) cache_clear(c);
  Entry *e = (Entry *)malloc(sizeof(Entry) + n);
  if (!e) return; /* not cached: the next statement walks again */
  e->hash = h;
  e->nHit = nHit;
  e->n = n;
  memcpy(e->key, k, n);
  e->next = c->buckets[h % NBUCKET];
  c->buckets[h % NBUCKET] = e;
  c->nEntry++;
}

/* the cache of c as of now: emptied when the database changed since it was filled (a
** commit of any connection, this one included, changes SQLITE_FCNTL_DATA_VERSION);
** not used inside an explicit transaction, whose own uncommitted changes the data
** version does not show (c->valid 0: counted as bm25() does, nothing kept) */
static void cache_check(Cache *c) {
  unsigned int dv = 0;
  unsigned int epoch = __atomic_load_n(&g_epoch, __ATOMIC_SEQ_CST);
  if (epoch != c->epoch) {
    cache_clear(c);
    c->valid = 0;
    c->epoch = epoch;
  }
  if (!S.get_autocommit(c->db) ||
      S.file_control(c->db, "main", SQLITE_FCNTL_DATA_VERSION, &dv) != SQLITE_OK) {
    c->valid = 0;
    return;
  }
  if (!c->valid || dv != c->dataVersion) {
    cache_clear(c);
    c->dataVersion = dv;
    c->valid = 1;
  }
}

/* ------------------------------------------------ BM25 */
/* A phrase's IDF is needed only for a row where its weighted frequency is not 0.0:
** there bm25()'s term is idf * (f * (k1 + 1)) / (f + k1 * (...)), and with f == 0.0 it
** is 0.0 * idf / x, the same value (0.0, -0.0 or NaN, whatever x) for every positive
** finite idf. So each phrase is counted (its walk) at the first row that needs it, and
** a phrase no ranked row needs is never walked: a facet filter's tokens (the facets
** column weighs 0: ``ddl.FTS_RANKS``), a phrase of an OR that no ranked row holds. The
** ranks stay bm25()'s bit for bit; only the walks that cannot change them are left. */
typedef struct Data {
  int nPhrase;
  int parts;            /* keys given per phrase (== nPhrase), else the whole MATCH */
  int keyed;            /* the cache is usable for this statement */
  sqlite3_int64 nRow;
  double avgdl;
  double *aIDF;
  double *aFreq;
  unsigned char *known; /* aIDF[i] computed */
  /* ck_bm25_top: the k best scores so far (a min-heap of nHeap, k slots), the rowid
  ** of the last row and the direction rows come in; noPrune once a row breaks it */
  int topk;
  int nHeap;
  double *heap;
  int dir;
  int nSeen;
  int noPrune;
  sqlite3_int64 lastRowid;
  int nCol;
  int *aSize; /* each phrase's tokens */
  int *aEnd;  /* per column, the end of the row's last instance: its least size */
} Data;

static int count_cb(const Fts5ExtensionApi *api, Fts5Context *fts, void *user) {
  (void)api;
  (void)fts;
  (*(sqlite3_int64 *)user)++;
  return SQLITE_OK;
}

/* the document count of phrase i (FTS5's walk, or the cache's copy of it) */
static int phrase_hits(const Fts5ExtensionApi *api, Fts5Context *fts, Cache *c, const char *k,
                       int n, int i, sqlite3_int64 *pnHit) {
  uint64_t h = 0;
  if (k) {
    h = fnv(k, n);
    Entry *e = cache_find(c, k, n, h);
    if (e) {
      c->hits++;
      *pnHit = e->nHit;
      return SQLITE_OK;
    }
  }
  sqlite3_int64 nHit = 0;
  int rc = api->xQueryPhrase(fts, i, (void *)&nHit, count_cb);
  if (rc == SQLITE_OK) {
    *pnHit = nHit;
    if (k) {
      c->misses++;
      cache_put(c, k, n, h, nHit);
    }
  }
  return rc;
}

/* the statement's data (made at its first row): row count, average size, the key
** layout; no phrase counted yet (phrase_idf) */
#define MAX_TOPK 100000

static int get_data(const Fts5ExtensionApi *api, Fts5Context *fts, Cache *c, int nVal,
                    sqlite3_value **apVal, int wAt, int topk, Data **out) {
  int rc = SQLITE_OK;
  Data *p = (Data *)api->xGetAuxdata(fts, 0);
  if (p) {
    *out = p;
    return SQLITE_OK;
  }
  int nPhrase = api->xPhraseCount(fts);
  /* pruning needs every weight >= 0 (a row's weighted frequency then only grows its
  ** score; its length only shrinks it) */
  for (int j = wAt; topk > 0 && j < nVal; j++)
    if (!(S.value_double(apVal[j]) >= 0.0)) topk = 0;
  if (topk > MAX_TOPK) topk = 0;
  int nCol = api->xColumnCount(fts);
  size_t heapBytes = topk > 0 ? (size_t)topk * sizeof(double) : 0;
  p = (Data *)calloc(1, sizeof(Data) + heapBytes + (size_t)nPhrase * (2 * sizeof(double)) +
                            (size_t)(nPhrase + nCol) * sizeof(int) + (size_t)nPhrase);
  if (!p) return SQLITE_NOMEM;
  p->nPhrase = nPhrase;
  p->topk = topk;
  p->nCol = nCol;
  p->heap = (double *)&p[1];
  p->aIDF = &p->heap[topk > 0 ? topk : 0];
  p->aFreq = &p->aIDF[nPhrase];
  p->aSize = (int *)&p->aFreq[nPhrase];
  p->aEnd = &p->aSize[nPhrase];
  p->known = (unsigned char *)&p->aEnd[nCol];
  for (int i = 0; i < nPhrase; i++) p->aSize[i] = api->xPhraseSize(fts, i);
  rc = api->xRowCount(fts, &p->nRow);
  sqlite3_int64 nToken = 0;
  if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &nToken);
  if (rc == SQLITE_OK) p->avgdl = (double)nToken / (double)p->nRow;
  if (!(p->avgdl > 0.0)) p->topk = 0; /* an empty table: no bound */

  /* the keys: table 0x1e key [0x1e i] */
  if (nVal >= 2 && S.value_type(apVal[0]) != SQLITE_NULL && S.value_type(apVal[1]) != SQLITE_NULL) {
    const char *tab = (const char *)S.value_text(apVal[0]);
    const char *key = (const char *)S.value_text(apVal[1]);
    int nKey = S.value_bytes(apVal[1]);
    if (tab && key) {
      int parts = 1;
      if (nKey && key[0] == 0x1e) parts = 0; /* the whole MATCH: keyed with each index */
      for (int j = 0; parts && j < nKey; j++) parts += key[j] == 0x1f;
      p->parts = parts;
      cache_check(c);
      p->keyed = c->valid;
    }
  }
  if (rc == SQLITE_OK) rc = api->xSetAuxdata(fts, p, free);
  else free(p);
  *out = rc == SQLITE_OK ? p : 0;
  return rc;
}

/* phrase i's IDF in p->aIDF[i], counted now (or taken from the cache) */
static int phrase_idf(const Fts5ExtensionApi *api, Fts5Context *fts, Cache *c, sqlite3_value **apVal,
                      Data *p, int i) {
  char *buf = 0;
  int n = 0;
  if (p->keyed) {
    const char *tab = (const char *)S.value_text(apVal[0]);
    int nTab = S.value_bytes(apVal[0]);
    const char *key = (const char *)S.value_text(apVal[1]);
    int nKey = S.value_bytes(apVal[1]);
    if (tab && key) buf = (char *)malloc((size_t)nTab + nKey + 16);
    if (buf) {
      memcpy(buf, tab, nTab);
      buf[nTab] = 0x1e;
      n = nTab + 1;
      if (p->parts == p->nPhrase) { /* one key per phrase: the i-th part */
        const char *part = key, *end = key + nKey;
        for (int j = 0; j < i; j++) part = (const char *)memchr(part, 0x1f, (size_t)(end - part)) + 1;
        const char *sep = memchr(part, 0x1f, (size_t)(end - part));
        int len = (int)((sep ? sep : end) - part);
        memcpy(buf + n, part, len);
        n += len;
      } else { /* the MATCH and the phrase's index */
        memcpy(buf + n, key, nKey);
        n += nKey;
        buf[n++] = 0x1e;
        memcpy(buf + n, &i, sizeof(int));
        n += (int)sizeof(int);
      }
    }
  }
  sqlite3_int64 nHit = 0;
  int rc = phrase_hits(api, fts, c, buf, n, i, &nHit);
  free(buf);
  if (rc == SQLITE_OK) {
    double idf = log((p->nRow - nHit + 0.5) / (nHit + 0.5));
    if (idf <= 0.0) idf = 1e-6;
    p->aIDF[i] = idf;
    p->known[i] = 1;
  }
  return rc;
}

/* the k best scores so far: a min-heap of p->nHeap of p->topk slots (heap[0] the
** k-th best once full) */
static void heap_push(Data *p, double score) {
  double *h = p->heap;
  int i;
  if (p->nHeap < p->topk) {
    i = p->nHeap++;
    while (i > 0 && h[(i - 1) / 2] > score) {
      h[i] = h[(i - 1) / 2];
      i = (i - 1) / 2;
    }
    h[i] = score;
    return;
  }
  if (!(score > h[0])) return;
  i = 0; /* replace the worst, sift down */
  for (;;) {
    int l = 2 * i + 1, r = l + 1, m = i;
    double v = score;
    if (l < p->nHeap && h[l] < v) m = l, v = h[l];
    if (r < p->nHeap && h[r] < v) m = r;
    if (m == i) break;
    h[i] = h[m];
    i = m;
  }
  h[i] = score;
}

/* Whether a row's rank may be given as its bound (row_bound): the statement takes its
** rows in one direction of rowid (an FTS5 walk, each row ranked once). A row that
** breaks it (ranked twice, or out of order) stops the bounding for the rest of the
** statement: the k best so far hold distinct rows, later ones are ranked exactly. */
static int may_bound(const Fts5ExtensionApi *api, Fts5Context *fts, Data *p) {
  if (p->topk <= 0 || p->noPrune) return 0;
  sqlite3_int64 rid = api->xRowid(fts);
  if (p->nSeen == 1) p->dir = rid < p->lastRowid ? -1 : rid > p->lastRowid ? 1 : 0;
  if (p->nSeen >= 1 && (p->dir == 0 || (p->dir < 0 ? rid >= p->lastRowid : rid <= p->lastRowid))) {
    p->noPrune = 1;
    return 0;
  }
  p->lastRowid = rid;
  p->nSeen++;
  return 1;
}

/* The most the row's score can be: each phrase's term is
** idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * D / avgdl)), written as score's with
** the row's least length for D: in each column, the end of its last instance (offset
** + the phrase's tokens: detail=full offsets count the column's tokens), summed over
** the columns (D, xColumnSize(-1), is the row's tokens in all columns). For D >= that,
** weights >= 0 and the same IDFs, every operation is monotonic in IEEE arithmetic (the
** denominator only grows with D, the quotient only shrinks, the sum is taken in the
** same order), so the computed score is <= this bound. */
static double row_bound(const Data *p, double k1, double b) {
  double least = 0.0;
  for (int c = 0; c < p->nCol; c++) least += (double)p->aEnd[c];
  double ub = 0.0;
  for (int i = 0; i < p->nPhrase; i++) {
    double idf = p->known[i] ? p->aIDF[i] : 1.0;
    double f = p->aFreq[i];
    ub += idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * least / p->avgdl)));
  }
  return ub;
}

/* ck_bm25 (wAt 2, topk 0) and ck_bm25_top (wAt 3, topk its argument): the weights
** start at apVal[wAt] */
static void rank_row(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nVal,
                     sqlite3_value **apVal, int wAt, int topk) {
  const double k1 = 1.2;
  const double b = 0.75;
  Cache *c = (Cache *)api->xUserData(fts);
  Data *p = 0;
  double score = 0.0, D = 0.0;
  int nInst = 0;
  int rc = get_data(api, fts, c, nVal, apVal, wAt, topk, &p);
  double *aFreq = 0;
  if (rc == SQLITE_OK) {
    aFreq = p->aFreq;
    memset(aFreq, 0, sizeof(double) * p->nPhrase);
    if (p->topk > 0) memset(p->aEnd, 0, sizeof(int) * p->nCol);
    rc = api->xInstCount(fts, &nInst);
  }
  for (int i = 0; rc == SQLITE_OK && i < nInst; i++) {
    int ip, ic, io;
    rc = api->xInst(fts, i, &ip, &ic, &io);
    if (rc == SQLITE_OK) {
      /* the weights follow the table and key arguments (and k) */
      double w = (nVal - wAt > ic) ? S.value_double(apVal[ic + wAt]) : 1.0;
      aFreq[ip] += w;
      if (p->topk > 0 && ic >= 0 && ic < p->nCol && io + p->aSize[ip] > p->aEnd[ic])
        p->aEnd[ic] = io + p->aSize[ip];
    }
  }
  for (int i = 0; rc == SQLITE_OK && i < p->nPhrase; i++) {
    if (!p->known[i] && aFreq[i] != 0.0) rc = phrase_idf(api, fts, c, apVal, p, i);
  }
  int bounded = rc == SQLITE_OK && may_bound(api, fts, p);
  if (bounded && p->nHeap == p->topk) {
    double ub = row_bound(p, k1, b);
    if (ub < p->heap[0]) { /* strictly below the k-th best: not in the top k */
      c->pruned++;
      S.result_double(ctx, -1.0 * ub);
      return;
    }
  }
  if (rc == SQLITE_OK) {
    int nTok;
    rc = api->xColumnSize(fts, -1, &nTok);
    D = (double)nTok;
  }
  if (rc == SQLITE_OK) {
    for (int i = 0; i < p->nPhrase; i++) {
      /* a phrase not counted has aFreq[i] == 0.0: any positive IDF gives its term */
      double idf = p->known[i] ? p->aIDF[i] : 1.0;
      score += idf * ((aFreq[i] * (k1 + 1.0)) / (aFreq[i] + k1 * (1 - b + b * D / p->avgdl)));
    }
    if (bounded) {
      c->ranked++;
      if (score == score) heap_push(p, score); /* NaN: never a bound */
      else p->noPrune = 1;
    }
    S.result_double(ctx, -1.0 * score);
  } else {
    S.result_error_code(ctx, rc);
  }
}

static void ck_bm25(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nVal,
                    sqlite3_value **apVal) {
  rank_row(api, fts, ctx, nVal, apVal, 2, 0);
}

static void ck_bm25_top(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nVal,
                        sqlite3_value **apVal) {
  sqlite3_int64 k = 0;
  if (nVal >= 3 && S.value_type(apVal[2]) != SQLITE_NULL) k = (sqlite3_int64)S.value_double(apVal[2]);
  rank_row(api, fts, ctx, nVal, apVal, 3, k > 0 && k <= MAX_TOPK ? (int)k : 0);
}

/* ------------------------------------------------ registration */

/* 1 when ck_bm25 is registered on db (a live connection) */
int ck_registered(sqlite3 *db) {
  int found = 0;
  pthread_mutex_lock(&g_lock);
  for (Cache *c = g_registry; c && !found; c = c->nextConn) found = c->db == db && !c->broken;
  pthread_mutex_unlock(&g_lock);
  return found;
}

/* register ck_bm25 and ck_bm25_top on db; 0 ok, else an SQLite error code (or -1: not initialised) */
int ck_register(sqlite3 *db) {
  if (!g_ready) return -1;
  if (ck_registered(db)) return SQLITE_OK;
  fts5_api *api = 0;
  sqlite3_stmt *st = 0;
  int rc = S.prepare_v2(db, "SELECT fts5(?1)", -1, &st, 0);
  if (rc != SQLITE_OK) return rc;
  S.bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", 0);
  S.step(st);
  rc = S.finalize(st);
  if (rc != SQLITE_OK) return rc;
  if (!api || api->iVersion < 2) return 1; /* SQLITE_ERROR */
  Cache *c = (Cache *)calloc(1, sizeof(Cache));
  if (!c) return SQLITE_NOMEM;
  c->db = db;
  rc = api->xCreateFunction(api, "ck_bm25", c, ck_bm25, cache_destroy);
  if (rc != SQLITE_OK) {
    free(c);
    return rc;
  }
  /* ck_bm25 owns the cache (its destructor frees it when SQLite drops the function) */
  int rcTop = api->xCreateFunction(api, "ck_bm25_top", c, ck_bm25_top, 0);
  c->broken = rcTop != SQLITE_OK; /* not ready: the next ck_register replaces both */
  pthread_mutex_lock(&g_lock);
  c->nextConn = g_registry;
  g_registry = c;
  pthread_mutex_unlock(&g_lock);
  return rcTop;
}

/* the data version of db's main database (SQLITE_FCNTL_DATA_VERSION: changes with every
** commit to it by any connection, db's own included, and with nothing else: not a write
** to the temp schema); 0 ok, else an SQLite error code (or -1: not initialised) */
int ck_data_version(sqlite3 *db, unsigned int *out) {
  if (!g_ready) return -1;
  return S.file_control(db, "main", SQLITE_FCNTL_DATA_VERSION, out);
}

/* two counters of db's cache, read under g_lock (top 0: the count cache's hits and
** misses; 1: ck_bm25_top's rows ranked and bounded); 1 when db is registered, else 0 */
static int counters(sqlite3 *db, int top, sqlite3_int64 *a, sqlite3_int64 *b) {
  int found = 0;
  pthread_mutex_lock(&g_lock);
  for (Cache *c = g_registry; c && !found; c = c->nextConn)
    if (c->db == db) {
      *a = top ? c->ranked : c->hits;
      *b = top ? c->pruned : c->misses;
      found = 1;
    }
  pthread_mutex_unlock(&g_lock);
  return found;
}

/* the cache's hits and misses on db since it was registered (for benchmarks) */
int ck_stats(sqlite3 *db, sqlite3_int64 *hits, sqlite3_int64 *misses) {
  return counters(db, 0, hits, misses);
}

/* ck_bm25_top's rows on db since it was registered: ranked (length read) and bounded */
int ck_top_stats(sqlite3 *db, sqlite3_int64 *ranked, sqlite3_int64 *pruned) {
  return counters(db, 1, ranked, pruned);
}

/* db's phrase-count cache, checked (cache_check) and valid, or 0 (the library not
** ready, db not registered or broken, the cache emptied by a commit). Called on the
** thread using db, between its statements */
static Cache *checked_cache(sqlite3 *db) {
  Cache *c = 0;
  if (!g_ready) return 0;
  pthread_mutex_lock(&g_lock);
  for (Cache *x = g_registry; x && !c; x = x->nextConn)
    if (x->db == db && !x->broken) c = x;
  pthread_mutex_unlock(&g_lock);
  if (!c) return 0;
  cache_check(c);
  return c->valid ? c : 0;
}

/* the document count ck_bm25 keeps for one phrase on db: key as phrase_idf builds it
** for a phrase given its own key (table, 0x1e, the phrase as written); 1 and *out when
** kept and still valid (cache_check first: emptied when the database changed), else 0.
** Called on the thread using db, between its statements, as the cache's own uses are */
int ck_cached_count(sqlite3 *db, const char *key, int n, sqlite3_int64 *out) {
  Cache *c = checked_cache(db);
  if (!c) return 0;
  Entry *e = cache_find(c, key, n, fnv(key, n));
  if (!e) return 0;
  *out = e->nHit;
  return 1;
}

/* keep nHit as the document count of one phrase on db (key as ck_cached_count's), as if
** db had counted it: for a partition of one statement run on db (a second connection to
** the same file) with counts another connection keeps. The cache is checked first
** (cache_check: stamped with db's data version as of its last read), so a commit db has
** not seen yet empties it at db's next statement, this count included; the caller gives
** counts valid for the database as it is now. 1 when kept, else 0 (not registered, inside
** a transaction). Called on the thread using db, between its statements */
int ck_put_count(sqlite3 *db, const char *key, int n, sqlite3_int64 nHit) {
  Cache *c = checked_cache(db);
  if (!c) return 0;
  uint64_t h = fnv(key, n);
  Entry *e = cache_find(c, key, n, h);
  if (e) e->nHit = nHit;
  else cache_put(c, key, n, h, nHit);
  return 1;
}

/* empty the count caches of every connection (benchmarks: a search as a new process
** runs it, with no counts from earlier searches): each cache empties itself at its next
** use (cache_check), on the thread using it */
void ck_clear_all(void) { __atomic_add_fetch(&g_epoch, 1, __ATOMIC_SEQ_CST); }
